"""The verdicts page of a pull request's run, over HTTP with the real services."""

import re
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.dashboard import verdicts_page
from app.verdicts import service as verdicts_service
from tests.anomalies.test_service import history_rows, post_history
from tests.dashboard.test_pages import figures
from tests.factories import nightly

MAIN_RUNS = 30


def pr_payload(index: int, changes: dict[tuple[str, str], float], **fields: Any) -> dict[str, Any]:
    """A pull request's run on h100-8: the given (model, config) latencies, the rest as on main."""

    def changed(model: str, config: str, _: int) -> dict[str, float]:
        return {"latency": changes[model, config]} if (model, config) in changes else {}

    payload = nightly(index, history_rows(index, np.random.default_rng(99), changed))
    payload.update(key=f"pr-{index}", branch="feature-x", commit="feedface", **fields)
    return payload


@pytest.fixture
def main_history(client: TestClient, ingest_headers: dict[str, str]) -> list[int]:
    return post_history(client, ingest_headers, runs=range(MAIN_RUNS))


def post(client: TestClient, headers: dict[str, str], payload: dict[str, Any]) -> int:
    response = client.post("/api/v1/runs", json=payload, headers=headers)
    assert response.status_code == 201, response.text
    run_id: int = response.json()["id"]
    return run_id


def rows_of(html: str, verdict: str) -> list[str]:
    """The body rows of the table of one verdict."""
    table = rf'<table [^>]*data-verdict="{verdict}">.*?<tbody>(.*?)</tbody>'
    found = re.search(table, html, re.S)
    return re.findall(r"<tr>(.*?)</tr>", found.group(1), re.S) if found else []


def test_a_pull_request_twenty_percent_slower_on_one_model(
    client: TestClient, ingest_headers: dict[str, str], main_history: list[int]
) -> None:
    run_id = post(client, ingest_headers, pr_payload(MAIN_RUNS, {("bert", "eager"): 12.0}))
    api = client.get(f"/api/v1/runs/{run_id}/verdicts").json()
    page = client.get(f"/runs/{run_id}/verdicts")
    assert page.status_code == 200
    html = page.text

    assert "feature-x" in html
    assert "feedface" in html
    assert f'<a href="/runs/{main_history[-1]}">{main_history[-1]}</a>' in html  # the baseline
    assert "the newest nightly run before this one" in html
    assert f'href="/api/v1/runs/{run_id}/verdicts"' in html
    assert f'href="/runs/{run_id}"' in html
    for verdict, count in api["counts"].items():
        assert re.search(rf'data-verdict="{verdict}">{count} ', html), verdict
    assert api["counts"]["regression"] == 1

    (regression,) = rows_of(html, "regression")
    assert ">bert</a>" in regression
    assert "eager" in regression
    assert "latency" in regression
    assert "+20." in regression or "+19." in regression
    assert 'class="tag regression"' in regression
    assert len(rows_of(html, "pass")) == api["counts"]["pass"]  # under the cap: all shown
    assert "<details" in html  # passes are collapsed

    (chart,) = figures(html).values()  # one chart: the regression's
    traces = {t["name"]: t for t in chart["data"] if "name" in t}
    assert "bert · eager" in chart["layout"]["title"]["text"]
    ours = traces["feature-x (this run)"]
    assert ours["y"] == [pytest.approx(12.0)]
    assert ours["marker"]["symbol"] == "diamond"
    line = traces["nightly"]
    assert 3 <= len(line["y"]) <= verdicts_page.BEFORE
    assert all(9.5 < y < 10.5 for y in line["y"])  # bert's history on main, not the PR's point
    assert traces["fork point"]["hovertext"].startswith(f"fork point: run {main_history[-1]}")
    assert traces["baseline median"]["y"][0] == pytest.approx(api["items"][0]["base"])
    base, least = api["items"][0]["base"], api["items"][0]["threshold"]
    band = sorted(t["y"][0] for t in chart["data"] if t.get("legendgroup") == "band")
    assert band == pytest.approx([base * (1 - least), base * (1 + least)])

    run_page = client.get(f"/runs/{run_id}").text
    assert f'<a href="/runs/{run_id}/verdicts">Verdicts against nightly</a>' in run_page
    main_page = client.get(f"/runs/{main_history[-1]}").text
    assert "Verdicts against" not in main_page  # a default branch's run has no such link
    own = client.get(f"/runs/{main_history[-1]}/verdicts")  # reachable by URL all the same
    assert own.status_code == 200
    assert "This run is nightly's own: it is judged against the runs before it." in own.text


@pytest.mark.both_dialects
def test_what_one_view_renders_is_capped(
    client: TestClient,
    ingest_headers: dict[str, str],
    main_history: list[int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(verdicts_page, "CHARTS", 1)
    monkeypatch.setattr(verdicts_page, "PASSES_SHOWN", 3)
    monkeypatch.setattr(verdicts_page, "AFTER", 2)
    monkeypatch.setattr(verdicts_page, "BEFORE", 5)
    # A run of main after the fork point: drawn dotted, for context.
    later = nightly(MAIN_RUNS + 1, history_rows(MAIN_RUNS + 1, np.random.default_rng(7)))
    post(client, ingest_headers, later)
    changes = {("bert", "eager"): 12.0, ("resnet50", "default"): 16.0}
    run_id = post(
        client, ingest_headers, pr_payload(MAIN_RUNS, changes, base_commit=f"c{MAIN_RUNS - 1}")
    )
    api = client.get(f"/api/v1/runs/{run_id}/verdicts").json()
    assert (api["counts"]["regression"], api["counts"]["improvement"]) == (1, 1)
    html = client.get(f"/runs/{run_id}/verdicts").text

    (chart,) = figures(html).values()  # the regression's: improvements come after
    assert "bert · eager" in chart["layout"]["title"]["text"]
    assert "1 more change is not drawn" in html
    traces = {t["name"]: t for t in chart["data"] if "name" in t}
    assert len(traces["nightly"]["y"]) == 5
    assert len(traces["nightly after the fork"]["y"]) == 2  # the fork point, then the later run

    assert len(rows_of(html, "improvement")) == 1
    assert len(rows_of(html, "pass")) == 3
    more = api["counts"]["pass"] - 3
    assert f"{more} more passes are not shown here" in html
    assert f"Show 3 of {api['counts']['pass']} passes" in html


def test_names_from_uploads_stay_text_and_a_missing_run_gets_the_error_page(
    client: TestClient,
    ingest_headers: dict[str, str],
    main_history: list[int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    evil = "<script>alert(1)</script>"
    payload = pr_payload(MAIN_RUNS, {("bert", "eager"): 12.0})
    payload.update(branch=evil, commit=evil)  # a non-http(s) url is refused at ingestion
    run_id = post(client, ingest_headers, payload)
    html = client.get(f"/runs/{run_id}/verdicts").text
    assert evil not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    (chart,) = figures(html).values()  # escaped for Plotly too: drawn as typed, never markup
    assert any(t.get("name", "").startswith("&lt;script&gt;") for t in chart["data"])
    assert not any(evil in str(t.get("name")) for t in chart["data"])

    missing = client.get("/runs/999999/verdicts")
    assert missing.status_code == 404
    assert "Nothing here" in missing.text
    monkeypatch.setattr(verdicts_service, "MAX_RESULTS", 5)  # a run too big to judge at once
    too_big = client.get(f"/runs/{run_id}/verdicts")
    assert too_big.status_code == 413
    assert "This view cannot be shown" in too_big.text
    assert "at most 5" in too_big.text
