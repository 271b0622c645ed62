"""Bulk triage (issue 31, point 2): many findings at once, by hand or by filter, each triaged
and audited as one is; all or nothing; bounded. In Chromium: 20 findings from the alerts page."""

from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.anomalies import bulk_triage
from app.anomalies.models import AlertGroup, Regression
from app.audit.models import AuditEntry
from app.benchmarks.models import Series
from app.core.db import Database
from app.runs.ingest import ingest_run
from app.runs.models import Run
from app.runs.schemas import RunIn
from app.tokens.service import create_token
from tests.conftest import PEPPER, make_token
from tests.factories import result, run_payload


def findings(database: Database, count: int = 20, project: str | None = None) -> list[int]:
    """``count`` models stepped 20% between two runs: one group, a regression each."""
    with database.session_scope() as session:
        runs = []
        for index, level in enumerate((10.0, 12.0)):
            rows = [result(f"m{i:02d}", value=level) for i in range(count)]
            extra = {"project": project} if project else {}
            payload = run_payload(f"bulk-{project}-{index}", rows, index=index, **extra)
            runs.append(ingest_run(session, RunIn.model_validate(payload), source="upload").run.id)
        return [r.id for r in record_steps(session, runs)]


def record_steps(session: Session, runs: list[int]) -> list[Regression]:
    run = session.get_one(Run, runs[-1])
    group = AlertGroup(
        machine_id=run.machine_id,
        channel=run.channel,
        first_bad_run_id=runs[1],
        last_good_run_id=runs[0],
    )
    session.add(group)
    session.flush()
    series = session.scalars(
        select(Series)
        .where(Series.project == run.project, Series.machine_id == run.machine_id)
        .where(Series.channel == run.channel)
        .order_by(Series.id)
    ).all()
    steps = [
        Regression(
            series_id=one.id,
            group_id=group.id,
            last_good_run_id=runs[0],
            first_bad_run_id=runs[1],
            direction="regression",
            before=10.0,
            after=12.0,
            before_spread=0.1,
            after_spread=0.1,
            rel_change=0.2,
            p_value=1e-6,
            detector={"name": "change_point"},
        )
        for one in series
    ]
    session.add_all(steps)
    session.flush()
    return steps


def triage(client: TestClient, token: str, body: dict[str, Any]) -> Any:
    return client.post("/api/v1/triage", json=body, headers={"Authorization": f"Bearer {token}"})


def test_picked_findings_are_triaged_and_audited_each(
    client: TestClient, database: Database
) -> None:
    ids = findings(database)
    token = make_token(database, "triage", name="sheriff")
    update = {
        "status": "acknowledged",
        "assignee": "pt2-oncall",
        "bug_url": "https://bugs.example/1",
    }
    answer = triage(client, token, {"ids": {"regressions": ids[:15]}, "update": update})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"changed": {"regressions": ids[:15]}, "count": 15}
    stored = {r["id"]: r for r in client.get("/api/v1/regressions?limit=100").json()["items"]}
    for one in ids[:15]:
        assert stored[one]["status"] == "acknowledged"
        assert stored[one]["assignee"] == "pt2-oncall"
        assert stored[one]["triaged_by"].startswith("sheriff")
    assert {stored[one]["status"] for one in ids[15:]} == {"new"}
    with database.session_scope() as session:
        audited = session.scalar(
            select(func.count())
            .select_from(AuditEntry)
            .where(AuditEntry.action == "regression.triage")
        )
    assert audited == 15  # one record a finding, as one at a time would write


def test_a_filter_triages_what_the_listing_matches(client: TestClient, database: Database) -> None:
    ids = findings(database)
    token = make_token(database, "triage")
    body = {"regressions": {"status": "new", "machine": "h100-8"}, "update": {"status": "invalid"}}
    answer = triage(client, token, body)
    assert answer.json()["count"] == 20
    assert sorted(answer.json()["changed"]["regressions"]) == sorted(ids)
    groups = triage(client, token, {"groups": {"status": "invalid"}, "update": {"note": "noise"}})
    assert groups.json()["count"] == 1
    assert client.get("/api/v1/alert-groups").json()["items"][0]["note"] == "noise"


@pytest.mark.both_dialects  # bounds, bad input or SQL that differs by dialect
def test_too_many_or_none_or_two_ways_is_a_422(
    client: TestClient, database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = findings(database)
    token = make_token(database, "triage")
    update = {"status": "fixed"}
    monkeypatch.setattr(bulk_triage, "MAX_ROWS", 10)
    over = triage(client, token, {"regressions": {}, "update": update})
    assert over.status_code == 422
    assert "matches 20 regressions" in over.json()["detail"]
    assert triage(client, token, {"ids": {"regressions": ids}, "update": update}).status_code == 422
    assert triage(client, token, {"ids": {}, "update": update}).status_code == 422
    both = triage(client, token, {"ids": {"regressions": ids[:1]}, "groups": {}, "update": update})
    assert both.status_code == 422
    too_long = {"ids": {"regressions": list(range(1, 502))}, "update": update}
    assert triage(client, token, too_long).status_code == 422
    assert {r["status"] for r in client.get("/api/v1/regressions?limit=100").json()["items"]} == {
        "new"
    }


@pytest.mark.both_dialects  # bounds, bad input or SQL that differs by dialect
def test_all_or_nothing(client: TestClient, database: Database) -> None:
    mine = findings(database, 3)
    theirs = findings(database, 2, project="other")
    with database.session_scope() as session:
        _, limited = create_token(session, "limited", ["triage"], PEPPER, project="default")
    refused = triage(
        client, limited, {"ids": {"regressions": mine + theirs}, "update": {"status": "fixed"}}
    )
    assert refused.status_code == 403
    missing = triage(
        client, limited, {"ids": {"regressions": [*mine, 99999]}, "update": {"status": "fixed"}}
    )
    assert missing.status_code == 404
    statuses = {r["status"] for r in client.get("/api/v1/regressions?limit=100").json()["items"]}
    assert statuses == {"new"}  # none changed
    reader = make_token(database, "read")
    assert triage(client, reader, {"ids": {"regressions": mine}, "update": {}}).status_code == 403
