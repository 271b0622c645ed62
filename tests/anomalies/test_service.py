"""The anomaly service end to end: runs posted, detection in the background, triage."""

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.anomalies import registry, service
from app.anomalies.detectors import ChangePoint
from app.anomalies.history import History
from app.anomalies.models import Regression
from app.anomalies.service import Detection
from app.benchmarks.models import Metric, Series
from app.core.db import Database
from tests.conftest import make_token
from tests.factories import case_rows, nightly
from tests.history_cache import cached_history
from tests.posting import drain

RUNS = 40
BAD = 25  # first bad run of the injected regression
CONFIGS = ("eager", "default", "dynamic")


def history_rows(
    index: int,
    noise: np.random.Generator,
    change: Callable[[str, str, int], dict[str, float]] | None = None,
) -> list[dict[str, Any]]:
    """Three models x three configs; ``change(model, config, index)`` overrides metrics."""
    rows = []
    for model, base in (("bert", 10.0), ("resnet50", 20.0), ("llama", 40.0)):
        for config in CONFIGS:
            metrics = {
                "latency": base * (1 + noise.normal(0, 0.005)),
                "dynamo_peak_mem": 8.0,
                "graph_breaks": 0.0,
            }
            if model == "llama":  # noisy but flat
                metrics["latency"] = base * (1 + noise.normal(0, 0.05))
            if model == "resnet50" and config == "eager" and index == 10:
                metrics["latency"] = base * 3  # one outlier
            metrics.update(change(model, config, index) if change else {})
            latency = metrics.pop("latency")
            rows += case_rows(model, config, latency, **metrics)
    return rows


def post_history(
    client: TestClient,
    headers: dict[str, str],
    change: Callable[[str, str, int], dict[str, float]] | None = None,
    runs: range = range(RUNS),
    seed: int = 0,
) -> list[int]:
    """Post the runs through the API and detect them; their ids.

    A history built before on the same start is copied (``tests.history_cache``); ``change``
    then names it, so a lambda or a function of a test's own locals (whose captures it cannot
    tell) is always built.
    """
    named = change is None or not ({"<locals>", "<lambda>"} & set(change.__qualname__.split(".")))
    if not named:
        return _post_history(client, headers, change, runs, seed)
    name = None if change is None else f"{change.__module__}.{change.__qualname__}"
    key = ("post_history", name, runs.start, runs.stop, runs.step, seed)
    ids: list[int] = cached_history(
        client, headers, key, lambda: _post_history(client, headers, change, runs, seed)
    )
    return ids


def _post_history(
    client: TestClient,
    headers: dict[str, str],
    change: Callable[[str, str, int], dict[str, float]] | None,
    runs: range,
    seed: int,
) -> list[int]:
    noise = np.random.default_rng(seed)
    ids = []
    for index in runs:
        torch = "2.6.0.dev20260101" if index < BAD else "2.6.0.dev20260113"
        payload = nightly(
            index,
            history_rows(index, noise, change),
            torch=torch,
            triton="3.1.0" if index < BAD else "3.2.0",
        )
        response = client.post("/api/v1/runs", json=payload, headers=headers)
        assert response.status_code == 201, response.text
        ids.append(response.json()["id"])
    drain(client)  # in process: wait for detection; with Celery the caller polls
    return ids


def dynamic_bert_slower(model: str, config: str, index: int) -> dict[str, float]:
    if model == "bert" and config == "dynamic" and index >= BAD:
        return {"latency": 11.0 * (1 + np.sin(index) * 0.004)}
    return {}


def regressions(client: TestClient, **params: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = client.get("/api/v1/regressions", params=params).json()["items"]
    return items


def test_injected_regression_is_one_regression_in_one_group(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    ids = post_history(client, ingest_headers, dynamic_bert_slower)
    (found,) = regressions(client)
    assert found["direction"] == "regression"
    assert found["series"]["benchmark"]["model"] == "bert"
    assert found["series"]["benchmark"]["config"] == "dynamic"
    assert found["series"]["metric"]["name"] == "latency"
    assert (found["last_good_run_id"], found["first_bad_run_id"]) == (ids[BAD - 1], ids[BAD])
    assert found["rel_change"] == pytest.approx(0.10, abs=0.01)
    assert found["before"] == pytest.approx(10.0, rel=0.01)
    assert found["environment_diff"]["torch"] == ["2.6.0.dev20260101", "2.6.0.dev20260113"]
    assert found["environment_diff"]["packages"] == {"triton": ["3.1.0", "3.2.0"]}
    assert any("only the dynamic-shapes config moved" in h for h in found["hints"])
    assert found["detector"] == {  # the detector's name, then the thresholds it used
        "name": "change_point",
        "min_segment": 5,
        "max_p_value": 0.001,
        "min_rel_change": 0.03,
        "window": 20,
        "noise_multiple": 3.0,
        "min_rel_floor": 0.005,
        "small_noise_multiple": 1.0,
        "small_points": 10,
    }

    (group,) = client.get("/api/v1/alert-groups").json()["items"]
    assert group["id"] == found["group_id"]
    assert (group["status"], group["counts"]) == ("new", {"regression": 1})
    assert (group["configs"], group["metrics"]) == (["dynamic"], ["latency"])
    assert group["first_bad_run_id"] == ids[BAD]


def test_correlated_metrics_become_hints(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    def memory_and_breaks(model: str, config: str, index: int) -> dict[str, float]:
        changed = dynamic_bert_slower(model, config, index)
        if changed:
            changed |= {"dynamo_peak_mem": 10.0, "graph_breaks": 3.0}
        return changed

    post_history(client, ingest_headers, memory_and_breaks)
    latency = regressions(client, metric="latency")
    memory = regressions(client, metric="dynamo_peak_mem")
    assert len(latency) == len(memory) == 1
    assert latency[0]["group_id"] == memory[0]["group_id"]  # one cause, one group
    hints = " / ".join(latency[0]["hints"])
    assert "peak memory rose (+25%)" in hints
    assert "graph breaks appeared (0 -> 3)" in hints


def test_a_bad_nightly_across_many_benchmarks_is_one_group(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    def everything_slower(model: str, config: str, index: int) -> dict[str, float]:
        base = {"bert": 10.0, "resnet50": 20.0, "llama": 40.0}[model]
        return {"latency": base * 1.2} if index >= BAD and model != "llama" else {}

    post_history(client, ingest_headers, everything_slower)
    found = regressions(client, limit=50)
    assert len(found) == 6  # bert and resnet50 in three configs
    (group,) = client.get("/api/v1/alert-groups").json()["items"]
    assert group["counts"] == {"regression": 6}
    assert group["configs"] == sorted(CONFIGS)


def test_triage_persists_and_an_expected_step_does_not_fire_again(
    client: TestClient, ingest_headers: dict[str, str], database: Database
) -> None:
    post_history(client, ingest_headers, dynamic_bert_slower)
    (group,) = client.get("/api/v1/alert-groups").json()["items"]
    triager = {"Authorization": f"Bearer {make_token(database, 'triage', name='t')}"}
    update = {
        "status": "expected",
        "assignee": "ana",
        "note": "dynamic shapes now recompile",
        "bug_url": "https://bugs.example/1",
    }
    response = client.patch(f"/api/v1/alert-groups/{group['id']}", json=update, headers=triager)
    assert response.status_code == 200, response.text
    (member,) = response.json()["regressions"]
    assert (member["status"], member["assignee"], member["bug_url"]) == (
        "expected",
        "ana",
        "https://bugs.example/1",
    )

    post_history(client, ingest_headers, dynamic_bert_slower, runs=range(RUNS, RUNS + 15), seed=1)
    (still,) = regressions(client)
    assert still["status"] == "expected"
    assert client.get("/api/v1/alert-groups", params={"status": "expected"}).json()["total"] == 1
    assert client.get("/api/v1/alert-groups", params={"status": "new"}).json()["total"] == 0

    one = client.patch(
        f"/api/v1/regressions/{still['id']}", json={"status": "fixed"}, headers=triager
    )
    assert one.json()["status"] == "fixed"
    assert (
        client.patch(
            f"/api/v1/regressions/{still['id']}", json={"status": "gone"}, headers=triager
        ).status_code
        == 422
    )
    assert (
        client.patch(
            f"/api/v1/regressions/{still['id']}", json={"status": "fixed"}, headers=ingest_headers
        ).status_code
        == 403
    )
    assert client.patch("/api/v1/regressions/999", json={}, headers=triager).status_code == 404


def test_a_step_that_reverts_is_marked(client: TestClient, ingest_headers: dict[str, str]) -> None:
    def slower_then_back(model: str, config: str, index: int) -> dict[str, float]:
        return dynamic_bert_slower(model, config, index) if index < 33 else {}

    post_history(client, ingest_headers, slower_then_back, runs=range(45))
    steps = {r["direction"]: r for r in regressions(client)}
    assert steps["regression"]["reverted"] is True
    assert steps["regression"]["reverted_by_run_id"] == steps["improvement"]["first_bad_run_id"]
    assert any("reverts" in h for h in steps["improvement"]["hints"])
    reverted = client.get("/api/v1/regressions", params={"direction": "regression"}).json()
    assert reverted["total"] == 1


def test_a_run_where_everything_moves_is_flagged_anomalous(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    def all_shift_once(model: str, config: str, index: int) -> dict[str, float]:
        base = {"bert": 10.0, "resnet50": 20.0, "llama": 40.0}[model]
        return {"latency": base * 1.25, "dynamo_peak_mem": 9.0} if index == RUNS - 1 else {}

    ids = post_history(client, ingest_headers, all_shift_once)
    scored = client.get("/api/v1/run-anomalies", params={"machine": "h100-8"}).json()
    by_run = {a["run_id"]: a for a in scored}
    assert by_run[ids[-1]]["anomalous"] is True
    assert by_run[ids[-1]]["features"]["share_over_3"] > 0.5
    ordinary = [by_run[i]["anomalous"] for i in ids[15:-1]]
    assert sum(ordinary) <= 2
    assert regressions(client) == []  # one odd run is no step


def test_rescan_finds_what_incremental_detection_missed(
    client: TestClient, ingest_headers: dict[str, str], database: Database
) -> None:
    from app.anomalies import service

    client.app.state.publisher.jobs.clear()  # type: ignore[attr-defined]  # detection off
    post_history(client, ingest_headers, dynamic_bert_slower)
    assert regressions(client) == []
    with database.session_scope() as session:
        found = service.rescan(session)
    assert [r.direction for r in found.regressions] == ["regression"]
    with database.session_scope() as session:
        assert service.rescan(session).regressions == []  # idempotent
    assert len(regressions(client)) == 1


def found_again(index: int, known: list[Regression]) -> Detection:
    """``_record`` of a step at ``index`` of ten points, with these steps recorded before."""
    series = Series(id=1, metric=Metric(name="latency", higher_is_better=False))
    history = History(values=[10.0] * 5 + [11.0] * 5, run_ids=list(range(101, 111)))
    change = ChangePoint(index, 10.0, 11.0, 0.1, 1e-4, 0.01, 0.01)
    found_by = service.Finder(registry.CHANGE_POINT, registry.CHANGE_POINT.defaults)
    detection = Detection([], [])
    assert service._record(series, history, change, found_by, known, detection) is None
    return detection


def recorded(id_: int, first_bad: int, state: str) -> Regression:
    """A step recorded before: open when confirmed, else withdrawn by detection."""
    return Regression(
        id=id_,
        series_id=1,
        first_bad_run_id=first_bad,
        state=state,
        status="new" if state == "confirmed" else "invalid",
        triaged_by="" if state == "confirmed" else service.WITHDRAWN_BY,
        confirmation={},
    )


def test_a_change_finds_its_own_step_again_not_one_withdrawn_beside_it() -> None:
    """Restoring a run revives its own step, never the one found one run later without it,
    whatever order the database returned them in (Postgres returns rows in no set order)."""
    own, beside = recorded(7, 106, "confirmed"), recorded(3, 107, "withdrawn")
    for known in ([own, beside], [beside, own]):
        detection = found_again(5, known)
        assert (own.state, own.status) == ("confirmed", "new")
        assert (beside.state, beside.status) == ("withdrawn", "invalid")
        assert (detection.confirmed, detection.regressions) == ([], [])


def test_an_open_step_is_found_again_before_a_nearer_withdrawn_one() -> None:
    open_, withdrawn = recorded(9, 105, "confirmed"), recorded(2, 107, "withdrawn")
    detection = found_again(6, [withdrawn, open_])
    assert (withdrawn.state, withdrawn.status) == ("withdrawn", "invalid")
    assert detection.confirmed == []
