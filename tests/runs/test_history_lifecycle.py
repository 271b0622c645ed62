"""History that stays fast: monthly partitions of ``result`` (Postgres) and retention."""

from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select, text

from app.audit.models import AuditEntry
from app.core.config import Settings
from app.core.db import Database
from app.corrections.retention import ACTION, apply_retention
from app.runs import partitions
from app.runs.models import Result, Run
from tests.conftest import make_token
from tests.factories import START, many_results, run_payload
from workers import cli

POSTGRES = pytest.mark.parametrize("database_url", ["postgres"], indirect=True)


def post(client: TestClient, payload: dict[str, Any], headers: dict[str, str]) -> Any:
    response = client.post("/api/v1/runs", json=payload, headers=headers)
    assert response.status_code in (200, 201), response.text
    return response.json()


def where_results_are(database: Database) -> dict[str, int]:
    """Each partition holding results, with how many."""
    with database.session_scope() as session:
        rows = session.execute(
            text("SELECT tableoid::regclass::text, count(*) FROM result GROUP BY 1")
        )
        return {str(name): int(count) for name, count in rows}


@POSTGRES
def test_connections_plan_without_jit(database: Database) -> None:
    with database.session_scope() as session:
        assert session.scalar(text("SHOW jit")) == "off"


@POSTGRES
def test_results_land_in_their_months_partition_and_ingest_stays_idempotent(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    with database.session_scope() as session:
        assert partitions.is_partitioned(session)
        months = set(
            session.execute(
                text("SELECT relid::text FROM pg_partition_tree('result') WHERE level > 0")
            ).scalars()
        )
    assert partitions.DEFAULT_PARTITION in months
    ahead = [partitions.add_months(partitions.month_of(_now(database)), i) for i in range(4)]
    assert {partitions.partition_name(m) for m in ahead} <= months  # made by the migration

    january = run_payload("jan", many_results(6))  # START: 2026-01, a month of its own
    far = run_payload("far", many_results(6), started_at="2031-05-17T08:00:00+00:00")
    stored = post(client, january, ingest_headers)
    admin = {"Authorization": f"Bearer {make_token(database, 'admin')}"}  # outside the window
    post(client, far, admin)  # no partition for May 2031: the DEFAULT one takes it
    again = post(client, january, ingest_headers)  # a retry: the stored run, nothing added
    assert again["id"] == stored["id"]
    before = where_results_are(database)
    assert sum(before.values()) == 12

    with database.session_scope() as session:
        partitions.keep_up(session)  # the daily upkeep: the strays get months of their own
    after = where_results_are(database)
    # ... but an outlier past the months made ahead stays in DEFAULT: no partition a month.
    assert after == {"result_y2026m01": 6, partitions.DEFAULT_PARTITION: 6}
    assert post(client, january, ingest_headers)["id"] == stored["id"]
    assert where_results_are(database) == after
    points = client.get(f"/api/v1/runs/{stored['id']}").json()["results"]
    assert len(points) == 6


def _now(database: Database) -> Any:
    with database.session_scope() as session:
        return session.scalar(text("SELECT now()"))


def test_retention_clears_old_samples_and_deletes_old_branch_runs(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    rows = many_results(4)  # with samples
    post(client, run_payload("old-main", rows, index=0), ingest_headers)
    post(client, run_payload("old-pr", rows, index=1, branch="fix-1", trigger="ci"), ingest_headers)
    post(client, run_payload("new-main", rows, index=80), ingest_headers)
    post(
        client, run_payload("new-pr", rows, index=81, branch="fix-2", trigger="ci"), ingest_headers
    )
    now = START + timedelta(days=45)  # runs 0 and 1 are 45 days old, 80 and 81 five

    def state() -> tuple[dict[str, int], dict[str, int]]:
        with database.session_scope() as session:
            with_samples = dict(
                session.execute(
                    select(Run.key, func.count(Result.samples))
                    .join(Result, Result.run_id == Run.id)
                    .group_by(Run.key)
                ).all()
            )
            values = dict(
                session.execute(
                    select(Run.key, func.count(Result.value))
                    .join(Result, Result.run_id == Run.id, isouter=True)
                    .group_by(Run.key)
                ).all()
            )
        return with_samples, values

    untouched = state()
    assert untouched[0] == {"old-main": 4, "old-pr": 4, "new-main": 4, "new-pr": 4}

    dry = apply_retention(database, 30, 30, dry_run=True, now=now)
    assert (dry.samples_cleared, dry.runs_deleted, dry.results_deleted) == (8, 1, 4)
    assert state() == untouched  # a dry run changes nothing

    swept = apply_retention(database, 30, 30, now=now)
    assert (swept.samples_cleared, swept.runs_deleted, swept.results_deleted) == (8, 1, 4)
    with_samples, values = state()
    assert with_samples == {"old-main": 0, "new-main": 4, "new-pr": 4}
    assert values == {"old-main": 4, "new-main": 4, "new-pr": 4}  # the values stay
    with database.session_scope() as session:
        entries = session.scalars(select(AuditEntry).where(AuditEntry.action == ACTION)).all()
        assert [e.after["runs_deleted"] for e in entries] == [1]  # the dry run left none
        assert entries[0].after["samples_cleared"] == 8

    # The next pass starts where this one stopped; settings at 0 keep everything.
    later = apply_retention(database, 30, 30, now=now + timedelta(days=1))
    assert (later.samples_cleared, later.runs_deleted) == (0, 0)
    assert (
        apply_retention(database, 0, 0, now=now + timedelta(days=400)).summary()["samples_cleared"]
        == 0
    )
    assert state() == (with_samples, values)


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_the_retention_command_counts_on_a_dry_run_and_deletes_otherwise(
    client: TestClient,
    database: Database,
    ingest_headers: dict[str, str],
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    rows = many_results(3)
    post(client, run_payload("pr", rows, branch="fix-3", trigger="ci"), ingest_headers)
    post(client, run_payload("main", rows, index=1), ingest_headers)  # START: months ago
    configured = settings.model_copy(update={"RETAIN_BRANCH_RUNS_DAYS": 30})
    monkeypatch.setattr("app.core.config.settings", configured)

    assert cli.main(["retention", "--dry-run"]) == 0
    assert "UTC: 1 would be deleted, with 3 results" in capsys.readouterr().out
    with database.session_scope() as session:
        assert session.scalar(select(func.count()).select_from(Run)) == 2
    assert cli.main(["retention"]) == 0
    assert "would" not in capsys.readouterr().out
    with database.session_scope() as session:
        assert list(session.scalars(select(Run.key))) == ["main"]
