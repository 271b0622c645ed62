"""Backtests: thresholds tried over stored history, scored against triage, before they are set."""

from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.core.config import Settings
from app.core.db import Database
from app.main import create_app
from tests.anomalies.test_service import BAD, dynamic_bert_slower, post_history, regressions
from tests.conftest import make_token


def headers(database: Database, scope: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {make_token(database, scope, name=f'{scope}-person')}"}


def backtest(client: TestClient, database: Database, **body: Any) -> dict[str, Any]:
    answer = client.post("/api/v1/backtests", json=body, headers=headers(database, "triage"))
    assert answer.status_code == 200, answer.text
    report: dict[str, Any] = answer.json()
    return report


def test_a_stricter_setting_is_shown_what_it_would_drop_and_how_that_was_triaged(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    post_history(client, ingest_headers, dynamic_bert_slower)
    (step,) = regressions(client)
    client.patch(
        f"/api/v1/regressions/{step['id']}",
        json={"status": "fixed"},
        headers=headers(database, "triage"),
    )
    same = backtest(client, database, select={"model": "bert"})
    assert (same["kept"], same["added"], same["removed"]) == (1, 0, 0)
    assert same["now"] == {"findings": 1, "real": 1, "invalid": 0, "missed": 0, "precision": 1.0}
    assert same["proposed"]["precision"] == 1.0
    assert same["series"] == 9  # bert: three configs x three metrics
    assert same["points"] > 0

    # The floor bounds small steps too: nothing under 20% (docs/alerts.md).
    stricter = {"suite:torchbench": {"min_rel_change": 0.2, "min_rel_floor": 0.2}}
    report = backtest(client, database, thresholds=stricter, select={"model": "bert"})
    assert (report["kept"], report["added"], report["removed"]) == (0, 0, 1)
    (dropped,) = report["items"]
    assert dropped["change"] == "removed"
    assert (dropped["regression_id"], dropped["label"]) == (step["id"], "real")
    assert dropped["case"] == "bert · dynamic · bf16"
    assert report["proposed"] == {
        "findings": 0,
        "real": 0,
        "invalid": 0,
        "missed": 0,
        "precision": None,
    }


def test_a_looser_setting_is_shown_what_it_would_add(
    settings: Settings, database: Database, ingest_headers: dict[str, str]
) -> None:
    # Stored detection reported nothing under 20% on latency: the 10% step went unrecorded.
    strict = {"metric:latency": {"min_rel_change": 0.2, "min_rel_floor": 0.2}}
    application = create_app(settings.model_copy(update={"DETECTOR_THRESHOLDS": strict}))
    with TestClient(application) as client:
        ids = post_history(client, ingest_headers, lambda *case: dynamic_bert_slower(*case))
        assert regressions(client) == []
        defaults = {"metric:latency": {"min_rel_change": 0.03, "noise_multiple": 3}}
        report = backtest(client, database, thresholds=defaults, select={"config": "dynamic"})
    application.state.database.dispose()
    assert (report["kept"], report["added"], report["removed"]) == (0, 1, 0)
    (added,) = report["items"]
    assert (added["change"], added["first_bad_run_id"]) == ("added", ids[BAD])
    assert (added["regression_id"], added["label"]) == (None, "")
    assert report["proposed"]["findings"] == 1


def test_a_subscription_is_replayed_over_stored_findings(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    post_history(client, ingest_headers, dynamic_bert_slower)
    admin = headers(database, "admin")
    body = {"name": "dynamic", "match": {"config": "dynamic"}, "receivers": [{"kind": "feed"}]}
    made = client.post("/api/v1/subscriptions", json=body, headers=admin).json()
    report = backtest(client, database, subscription_id=made["id"], select={"model": "nothing"})
    assert report["subscription"] == {
        "findings": 1,
        "real": 0,
        "invalid": 0,
        "missed": 0,
        "untriaged": 1,
        "precision": None,
    }
    assert report["series"] == 0


@pytest.mark.parametrize(
    ("body", "status", "loc"),
    [
        ({"thresholds": {"suite:x": {"min_rel_chnge": 0.1}}}, 422, "thresholds"),
        ({"thresholds": {"nope:x": {}}}, 422, "thresholds"),
        ({"thresholds": {"suite:x": {"window": "30"}}}, 422, "thresholds.suite:x.window"),
        ({"select": {"modle": "bert"}}, 422, "select.modle"),
        ({"subscription_id": 99999}, 404, None),
    ],
)
def test_a_bad_backtest_is_refused_where_it_is(
    client: TestClient, database: Database, body: dict[str, Any], status: int, loc: str | None
) -> None:
    answer = client.post("/api/v1/backtests", json=body, headers=headers(database, "triage"))
    assert answer.status_code == status, answer.text
    if loc is not None:
        assert answer.json()["errors"][0]["loc"] == loc
    assert client.post("/api/v1/backtests", json={}).status_code == 401
    read_only = client.post("/api/v1/backtests", json={}, headers=headers(database, "read"))
    assert read_only.status_code == 403
