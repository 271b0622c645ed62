"""Aggregate findings on the alerts page: the table, its rule, levels, explanations, triage."""

from fastapi.testclient import TestClient

from app.core.db import Database
from tests.anomalies.test_aggregate_findings import MODELS, nightly
from tests.anomalies.test_aggregate_triage import pass_rate_drops
from tests.conftest import sign_in


def test_a_pass_rate_finding_shows_its_rule_levels_runs_explanations_and_actions(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    runs = pass_rate_drops(client, ingest_headers)
    sign_in(client, database, "triage")  # the actions are a triager's
    (found,) = client.get("/api/v1/aggregate-findings").json()["items"]
    group = found["group_id"]
    text = client.get("/alerts").text
    assert "1 aggregate" in text  # the header counts it
    assert 'aria-label="Aggregates of alert group' in text
    assert "torchbench · cudagraphs · bf16 · inference" in text
    assert "pass_rate" in text
    assert "pass rate below 90%" in text
    assert "100.0% → 70.0%" in text
    assert f'last good <a href="/runs/{runs[3]}">run {runs[3]}</a>' in text
    assert f'first bad <a href="/runs/{runs[4]}">run {runs[4]}</a>' in text
    for failure in found["explained_by"]["failures"]:
        assert f'<a href="/alerts?group={group}#failure-{failure}">failure {failure}</a>' in text
        assert f'id="failure-{failure}"' in text  # the link's target, in the failures table
    assert f'data-endpoint="/api/v1/aggregate-findings/{found["id"]}"' in text
    assert "recovered" not in text

    assert "Alert group" in client.get("/alerts", params={"direction": "aggregate"}).text
    nightly(client, ingest_headers, 5)
    page = client.get("/alerts", params={"group": str(group)}).text
    assert f'recovered at <a href="/runs/{runs[4] + 1}">' in page


def test_a_speedup_step_shows_as_a_ratio_and_links_its_regressions(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    slower = dict.fromkeys(MODELS[:3], 0.88)
    for index in range(18):
        nightly(client, ingest_headers, index, factors=slower if index >= 12 else None)
    (found,) = client.get("/api/v1/aggregate-findings").json()["items"]
    assert (found["stat"], found["rule"]) == ("geomean_speedup", "step")
    text = client.get("/alerts", params={"group": str(found["group_id"])}).text
    assert "step (change-point detector)" in text
    assert f"{found['before']:.2f}x → {found['after']:.2f}x" in text
    regressions = found["explained_by"]["regressions"]
    assert len(regressions) == 3
    for regression in regressions:
        assert f'#regression-{regression}">regression {regression}</a>' in text
