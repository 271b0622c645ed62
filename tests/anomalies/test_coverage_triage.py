"""Coverage findings through the API: their severity, the failure and severity filters, the
group's counts; and they explain no aggregate."""

from typing import Any

from fastapi.testclient import TestClient

from app.core.db import Database
from tests.anomalies import test_aggregate_findings as aggregates
from tests.anomalies.test_aggregate_triage import BREAKING
from tests.anomalies.test_coverage import post
from tests.anomalies.test_failures import MODELS
from tests.conftest import make_token
from tests.factories import run_payload
from tests.posting import post_detected

WITHOUT_T5 = tuple(m for m in MODELS if m != "t5")


def listed(client: TestClient, **params: object) -> list[tuple[str, str, str]]:
    page = client.get("/api/v1/failures", params=params)
    assert page.status_code == 200, page.text
    body = page.json()
    assert body["total"] == len(body["items"])
    return sorted((f["model"], f["failure"], f["severity"]) for f in body["items"])


def mixed_nightly(client: TestClient, headers: dict[str, str]) -> list[int]:
    """Three full nightlies, then one where t5 is gone, vit is new and bert fails (OOM)."""
    runs = [post(client, headers, i) for i in range(3)]
    models = (*WITHOUT_T5, "vit")
    return [*runs, post(client, headers, 3, models, outcomes={"bert": "oom"})]


def test_coverage_findings_have_a_low_severity_and_are_filtered_apart(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    runs = mixed_nightly(client, ingest_headers)
    assert listed(client) == [
        ("bert", "failed", "high"),
        ("t5", "removed", "low"),
        ("vit", "added", "low"),
    ]
    assert listed(client, severity="low") == [("t5", "removed", "low"), ("vit", "added", "low")]
    assert listed(client, severity="high") == [("bert", "failed", "high")]
    assert listed(client, failure="removed") == [("t5", "removed", "low")]
    assert listed(client, failure="added") == [("vit", "added", "low")]
    assert listed(client, failure="failed") == [("bert", "failed", "high")]
    assert listed(client, failure="accuracy") == []
    assert listed(client, failure="added", severity="high") == []
    for refused in ({"failure": "gone"}, {"severity": "medium"}):
        assert client.get("/api/v1/failures", params=refused).status_code == 422

    (group,) = client.get("/api/v1/alert-groups").json()["items"]
    assert group["counts"] == {"failure": 1, "coverage": 2}  # a new model does not fail
    assert group["metrics"] == ["latency"]  # bert's; a coverage change names no metric
    detail = client.get(f"/api/v1/alert-groups/{group['id']}").json()
    removed = next(f for f in detail["failures"] if f["failure"] == "removed")
    assert (removed["severity"], removed["model"], removed["metric"]) == ("low", "t5", "")
    assert (removed["last_passing_run_id"], removed["first_failing_run_id"]) == tuple(runs[2:4])
    assert client.get(f"/api/v1/failures/{removed['id']}").json() == removed


def test_a_coverage_finding_is_triaged_like_a_failure(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    mixed_nightly(client, ingest_headers)
    (removed,) = client.get("/api/v1/failures", params={"failure": "removed"}).json()["items"]
    triager = {"Authorization": f"Bearer {make_token(database, 'triage', name='t')}"}
    answer = client.patch(
        f"/api/v1/failures/{removed['id']}", json={"status": "expected"}, headers=triager
    )
    assert answer.status_code == 200, answer.text
    assert (answer.json()["status"], answer.json()["severity"]) == ("expected", "low")
    assert listed(client, status="expected") == [("t5", "removed", "low")]


def nightly_with_coverage_change(client: TestClient, headers: dict[str, str], index: int) -> int:
    """An aggregate nightly where three models fail, model_9 is gone and model_new is new."""
    rows = [
        row
        for model in (*aggregates.MODELS[:-1], "model_new")
        for row in aggregates.case(model, BREAKING.get(model, "pass"), aggregates.SPEEDUP)
    ]
    return post_detected(client, headers, run_payload(f"n-{index}", rows, index=index))


def test_coverage_changes_do_not_explain_an_aggregate(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    for index in range(4):
        aggregates.nightly(client, ingest_headers, index)
    nightly_with_coverage_change(client, ingest_headers, 4)
    failures: list[dict[str, Any]] = client.get("/api/v1/failures").json()["items"]
    by_kind = {
        severity: sorted(f["id"] for f in failures if f["severity"] == severity)
        for severity in ("high", "low")
    }
    assert len(by_kind["high"]) == 3
    assert len(by_kind["low"]) == 2  # model_9 removed, model_new added
    (finding,) = client.get("/api/v1/aggregate-findings", params={"stat": "pass_rate"}).json()[
        "items"
    ]
    assert finding["rule"] == "pass_rate_below"
    assert finding["explained_by"]["failures"] == by_kind["high"]
