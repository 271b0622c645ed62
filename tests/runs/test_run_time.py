"""A run's time is bounded for tokens without admin: partitions follow a run's month."""

from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from app.core.db import Database
from app.runs import partitions
from tests.conftest import make_token
from tests.factories import many_results, result, run_payload

POSTGRES = pytest.mark.parametrize("database_url", ["postgres"], indirect=True)


def _window(client: TestClient) -> None:
    """The documented defaults (the test suite widens the window: tests/conftest.py)."""
    settings = client.app.state.settings  # type: ignore[attr-defined]
    client.app.state.settings = settings.model_copy(  # type: ignore[attr-defined]
        update={"RUN_TIME_BACK_DAYS": 400, "RUN_TIME_AHEAD_DAYS": 2}
    )


def test_a_run_outside_the_window_is_refused_unless_the_token_is_admin(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    _window(client)
    now = datetime.now(UTC)
    old = (now - timedelta(days=401)).isoformat()
    payload = run_payload("old", [result(value=1.0)], started_at=old)
    refused = client.post("/api/v1/runs", json=payload, headers=ingest_headers)
    assert refused.status_code == 422, refused.text
    assert [e["loc"] for e in refused.json()["errors"]] == ["body.started_at"]
    ahead = (now + timedelta(days=3)).isoformat()
    late = run_payload("late", [result(value=1.0)], started_at=now.isoformat(), finished_at=ahead)
    refused = client.post("/api/v1/runs", json=late, headers=ingest_headers)
    assert refused.status_code == 422, refused.text
    assert [e["loc"] for e in refused.json()["errors"]] == ["body.finished_at"]
    far = run_payload("far", [result(value=1.0)], started_at="2999-01-01T00:00:00Z")
    assert client.post("/api/v1/runs", json=far, headers=ingest_headers).status_code == 422
    recent = run_payload(
        "recent", [result(value=1.0)], started_at=(now - timedelta(days=399)).isoformat()
    )
    assert client.post("/api/v1/runs", json=recent, headers=ingest_headers).status_code == 201
    admin = {"Authorization": f"Bearer {make_token(database, 'admin')}"}
    stored = client.post("/api/v1/runs", json=payload, headers=admin)  # history, imported
    assert stored.status_code == 201, stored.text
    # An upload gives its times in fields: refused the same way, naming the field.
    upload = client.post(
        "/api/v1/uploads?format=native",
        content=b'{"key": "u1", "started_at": "1971-01-01T00:00:00Z", "machine": {"name": "a", '
        b'"device": "cpu"}, "results": [{"suite": "s", "model": "m", "metric": "latency", '
        b'"value": 1.0}]}',
        headers={**ingest_headers, "Content-Type": "application/json"},
    )
    assert upload.status_code == 422, upload.text
    assert upload.json()["errors"][0]["loc"] == "started_at"


def _partitions(database: Database) -> set[str]:
    with database.session_scope() as session:
        return set(
            session.execute(
                text("SELECT relid::text FROM pg_partition_tree('result') WHERE level > 0")
            ).scalars()
        )


@POSTGRES
def test_the_upkeep_makes_a_bounded_number_of_partitions_and_leaves_outliers_in_default(
    client: TestClient, database: Database
) -> None:
    admin = {"Authorization": f"Bearer {make_token(database, 'admin')}"}
    # Months no other test stores in: partitions outlive a test (only rows are emptied), and
    # another test's months made already would be missing from what this pass makes.
    now = datetime(2080, 12, 15, tzinfo=UTC)
    with database.session_scope() as session:  # the months ahead, before any history
        partitions.keep_up(session, now, per_pass=24, months_back=120)
    months = [partitions.add_months(partitions.month_of(now), -i) for i in range(1, 31)]
    for index, month in enumerate(months):  # 30 months of history, one run each
        at = datetime(month.year, month.month, 10, tzinfo=UTC).isoformat()
        payload = run_payload(f"h-{index}", many_results(1), started_at=at)
        assert client.post("/api/v1/runs", json=payload, headers=admin).status_code == 201
    for key, at in (("ancient", "1975-03-01T00:00:00Z"), ("future", "2990-07-01T00:00:00Z")):
        payload = run_payload(key, many_results(1), started_at=at)
        assert client.post("/api/v1/runs", json=payload, headers=admin).status_code == 201
    before = _partitions(database)
    with database.session_scope() as session:
        made = partitions.keep_up(session, now, per_pass=24, months_back=120)
    assert len(made) == 24  # before: every month found, 32
    assert made == sorted(partitions.partition_name(m) for m in months[:24])  # newest first
    with database.session_scope() as session:
        made = partitions.keep_up(session, now, per_pass=24, months_back=120)
    after = _partitions(database)
    assert {partitions.partition_name(m) for m in months} <= after
    assert not {"result_y1975m03", "result_y2990m07"} & (after | before)
    with database.session_scope() as session:
        outliers = session.scalar(text(f"SELECT count(*) FROM {partitions.DEFAULT_PARTITION}"))
        assert partitions.keep_up(session, now, per_pass=24, months_back=120) == []
    assert outliers == 2  # kept in DEFAULT, no partition a month for them
