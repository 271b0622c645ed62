"""The compare's statistics (issue 31, point 1): how sure each case is, through the API and on
the page, with its needs-more-runs button for a reader who may trigger and a prompt for one
who may not (in Chromium: ``tests/dashboard/test_compare_stats_browser.py``)."""

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.core.db import Database
from app.summaries import confidence
from tests.conftest import sign_in
from tests.factories import result, run_payload


def samples(level: float, count: int, spread: float, seed: int) -> list[float]:
    return [round(v, 6) for v in level * np.random.default_rng(seed).lognormal(0, spread, count)]


def two_runs(client: TestClient, headers: dict[str, str]) -> list[int]:
    """bert 10% slower on 20 samples a side; resnet unchanged on 30; t5 on 3 (too few to say);
    vit's new samples on two modes."""
    cases = {
        "bert": ((10.0, 20, 0.01), (11.0, 20, 0.01)),
        "resnet50": ((5.0, 30, 0.003), (5.0, 30, 0.003)),
        "t5": ((8.0, 3, 0.02), (8.8, 3, 0.02)),
        "vit": ((4.0, 30, 0.004), None),
    }
    ids = []
    for index in range(2):
        rows = []
        for seed, (model, sides) in enumerate(cases.items()):
            if index == 1 and sides[1] is None:
                found = samples(4.0, 18, 0.004, 90) + samples(5.2, 12, 0.004, 91)
            else:
                level, count, spread = sides[index] or sides[0]
                found = samples(level, count, spread, seed * 10 + index)
            rows.append(result(model, value=float(np.median(found)), samples=found))
        payload = run_payload(f"stats-{index}", rows, index=index)
        answer = client.post("/api/v1/runs", json=payload, headers=headers)
        ids.append(answer.raise_for_status().json()["id"])
    return ids


def by_model(rows: list[dict]) -> dict[str, dict]:
    return {row["model"]: row for row in rows}


def test_the_api_says_how_sure_each_case_is(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    base, new = two_runs(client, ingest_headers)
    params = {"base_run_id": base, "new_run_id": new, "metric": "latency", "stats": "true"}
    answer = client.get("/api/v1/compare", params=params).raise_for_status().json()
    rows = by_model(answer["rows"])
    bert = rows["bert"]["confidence"]
    assert bert["verdict"] == "worse"
    assert 1.05 < bert["interval"][0] <= bert["ratio"] <= bert["interval"][1]
    assert bert["p_value"] < 1e-4
    assert bert["cliffs_delta"] == 1.0
    assert bert["samples"] == [20, 20]
    assert rows["resnet50"]["confidence"]["verdict"] == "same"
    t5 = rows["t5"]["confidence"]
    assert (t5["verdict"], t5["needs_more"]) == ("unsure", True)
    assert rows["vit"]["confidence"]["bimodal"] == ["new"]
    geomean = answer["geomean"]
    assert geomean["count"] == 4
    low, high = geomean["interval"]
    assert low <= geomean["ratio"] <= high
    # Without stats the rows say nothing of it, and no samples are read.
    plain = client.get("/api/v1/compare", params={"base_run_id": base, "new_run_id": new}).json()
    assert plain["geomean"] is None
    assert all(row["confidence"] is None for row in plain["rows"])


@pytest.mark.both_dialects  # bounds, bad input or SQL that differs by dialect
def test_statistics_are_of_one_metric_and_bounded(
    client: TestClient, ingest_headers: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    base, new = two_runs(client, ingest_headers)
    params = {"base_run_id": base, "new_run_id": new, "stats": "true"}
    answer = client.get("/api/v1/compare", params=params)
    assert answer.status_code == 422
    assert answer.json()["errors"][0]["loc"] == "query.metric"
    monkeypatch.setattr(confidence, "MAX_CASES", 3)
    answer = client.get("/api/v1/compare", params=params | {"metric": "latency"})
    assert answer.status_code == 422
    assert answer.json()["errors"][0]["loc"] == "query.stats"
    assert "at most 3" in answer.json()["detail"]


@pytest.mark.both_dialects  # bounds, bad input or SQL that differs by dialect
def test_a_result_whose_samples_are_too_large_is_read_as_its_value(
    client: TestClient, ingest_headers: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    base, new = two_runs(client, ingest_headers)
    monkeypatch.setattr(confidence, "MAX_SAMPLE_BYTES", 100)
    params = {"base_run_id": base, "new_run_id": new, "metric": "latency", "stats": "true"}
    rows = by_model(client.get("/api/v1/compare", params=params).json()["rows"])
    bert = rows["bert"]["confidence"]
    assert bert["samples"] == [1, 1]
    assert bert["verdict"] == "unsure"
    assert "not read here" in bert["reason"]


def test_the_page_shows_how_sure_and_who_may_rerun(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    base, new = two_runs(client, ingest_headers)
    params = {"kind": "runs", "machine": "h100-8", "base_run": base, "new_run": new}
    page = client.get("/compare", params=params).text
    assert "How sure: run" in page
    assert '<span class="tag worse"' in page
    assert '<span class="tag same"' in page
    assert "needs more runs" in page
    assert "95% interval" in page
    assert "Cases with two modes" in page
    assert "with a <code>trigger</code> token to re-run them" in page
    assert 'action="/compare/reruns"' not in page
    sign_in(client, database, "trigger")
    page = client.get("/compare", params=params).text
    assert 'action="/compare/reruns"' in page
    # These runs were uploaded: no worker can measure them again, and the page says so.
    back = "&".join(f"{k}={v}" for k, v in params.items())
    csrf = sign_in(client, database, "trigger")
    answer = client.post("/compare/reruns", data={"csrf": csrf, "back": back})
    assert answer.status_code == 200
    assert "not measured again" in answer.text
    assert "not measured by a benchwatch worker" in answer.text


def test_a_rerun_asks_at_most_its_bound_of_cases_a_run() -> None:
    """Two configs of one run: each undecided row is two cases of that run."""
    from datetime import UTC, datetime

    from app.benchmarks.comparison import judge_samples
    from app.dashboard.compare import Side, Table, undecided
    from app.runs.models import Run
    from app.suite_runs.compare_reruns import MAX_CASES

    run = Run(id=7, started_at=datetime(2026, 12, 1, tzinfo=UTC))
    unsure = judge_samples([10.0, 10.2, 9.9], [11.0, 10.8, 11.1], higher_is_better=False)
    assert unsure is not None
    assert unsure.needs_more
    rows = [
        {
            "identities": [
                {"model": f"m{i}", "config": "eager"},
                {"model": f"m{i}", "config": "default"},
            ],
            "confidence": [unsure],
        }
        for i in range(30)
    ]
    found = undecided(Table([Side("eager", run, "eager"), Side("default", run, "default")], rows))
    assert found["count"] == 30
    assert found["cases"] == MAX_CASES // 2
    assert len(found["runs"][7]) == MAX_CASES


def test_a_crafted_rerun_form_is_no_error(client: TestClient, database: Database) -> None:
    csrf = sign_in(client, database, "trigger")
    crafted = "&".join(f"f{i}=1" for i in range(100))
    answer = client.post("/compare/reruns", data={"csrf": csrf, "back": crafted})
    assert answer.status_code == 200  # the compare page, with nothing to re-run
    assert "Nothing to compare yet" in answer.text


def configs_run(client: TestClient, headers: dict[str, str]) -> int:
    """One run: resnet's eager latency on 20 samples, its default config 10% faster."""
    rows = [
        result("resnet50", value=10.0, config="eager", samples=samples(10.0, 20, 0.01, 1)),
        result("resnet50", value=9.0, config="default", samples=samples(9.0, 20, 0.01, 2)),
        result("bert", value=5.0, config="eager", samples=samples(5.0, 20, 0.01, 3)),
    ]
    answer = client.post("/api/v1/runs", json=run_payload("configs", rows), headers=headers)
    run_id: int = answer.raise_for_status().json()["id"]
    return run_id


@pytest.mark.both_dialects  # bounds and bad input
def test_the_api_compares_config_against_config_with_its_statistics(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    run = configs_run(client, ingest_headers)
    params = {"base_run_id": run, "new_run_id": run, "metric": "latency", "stats": "true"}
    found = client.get(
        "/api/v1/compare", params=params | {"base_config": "eager", "new_config": "default"}
    )
    rows = by_model(found.raise_for_status().json()["rows"])
    assert rows["resnet50"]["verdict"] == "better"
    assert rows["resnet50"]["confidence"]["verdict"] == "better"
    assert rows["bert"]["verdict"] == "missing"  # no default config of bert
    one = client.get("/api/v1/compare", params=params | {"base_config": "eager"})
    assert one.status_code == 422
    assert one.json()["errors"][0]["loc"] == "query.new_config"
    both = params | {"base_config": "eager", "new_config": "default", "config": "eager"}
    assert client.get("/api/v1/compare", params=both).json()["errors"][0]["loc"] == "query.config"
