"""Silent machines: a machine that misses two of its usual intervals opens a finding."""

from datetime import datetime, timedelta

from fastapi.testclient import TestClient
from sqlalchemy import select

from app.anomalies import jobs, silence
from app.anomalies.models import AlertGroup, MachineSilence
from app.core.db import Database, utcnow
from app.runs.models import Run
from tests.anomalies.test_failures import nightly
from tests.conftest import make_token


def last_started(database: Database) -> Run:
    with database.session_scope() as session:
        return session.scalars(select(Run).order_by(Run.started_at.desc())).first()  # type: ignore[return-value]


def silences(database: Database) -> list[MachineSilence]:
    with database.session_scope() as session:
        return list(session.scalars(select(MachineSilence).order_by(MachineSilence.id)))


def test_two_missed_intervals_open_a_silence_and_the_next_run_ends_it(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    for index in range(5):  # every 12 hours
        nightly(client, ingest_headers, index, {})
    last = last_started(database)
    with database.session_scope() as session:
        (cadence,) = silence.cadences(session)
        assert cadence.every == timedelta(hours=12)
        # One missed run (with a little jitter) is not a silence; two are.
        assert silence.open_silences(session, last.started_at + timedelta(hours=25)) == []
        (opened,) = silence.open_silences(session, last.started_at + timedelta(hours=31))
        assert (opened.last_run_id, opened.expected_every_s) == (last.id, 43200.0)
        assert opened.silent_since == last.started_at
        group = session.get_one(AlertGroup, opened.group_id)
        assert (group.first_bad_run_id, group.last_good_run_id) == (last.id, last.id)
    with database.session_scope() as session:  # once per silence
        assert silence.open_silences(session, last.started_at + timedelta(days=3)) == []

    back = nightly(client, ingest_headers, 7, {"bert": "oom"})  # back, with a failure
    (ended,) = silences(database)
    assert ended.ended_by_run_id == back
    with database.session_scope() as session:
        groups = session.scalars(select(AlertGroup).order_by(AlertGroup.id)).all()
        assert len(groups) == 2  # the run's failure is not put in the silence's group
        assert [len(g.silences) for g in groups] == [1, 0]
        assert [len(g.failures) for g in groups] == [0, 1]


def test_no_cadence_before_four_runs(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    start = recently()
    for index in range(3):
        nightly(client, ingest_headers, index, {}, start)
    assert jobs.sweep_silence(database) == 0
    nightly(client, ingest_headers, 3, {}, start)
    assert jobs.sweep_silence(database) == 1  # its last run was 3 days ago
    assert jobs.sweep_silence(database) == 0


def recently(runs: int = 4) -> datetime:
    """When to start 12-hourly runs so that the last of ``runs`` is 3 days old."""
    return utcnow() - timedelta(days=3, hours=12 * (runs - 1))


def test_a_machine_quiet_for_weeks_is_retired_not_silent(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    for index in range(4):  # January: long before the retirement age
        nightly(client, ingest_headers, index, {})
    assert jobs.sweep_silence(database) == 0


def test_a_silence_is_triaged_listed_and_shown_like_any_finding(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    start = recently()
    for index in range(4):
        nightly(client, ingest_headers, index, {}, start)
    assert jobs.sweep_silence(database) == 1
    (group,) = client.get("/api/v1/alert-groups", params={"status": "new"}).json()["items"]
    assert group["counts"] == {"machine_silent": 1}
    detail = client.get(f"/api/v1/alert-groups/{group['id']}").json()
    (silent,) = detail["silences"]
    assert (silent["expected_every_s"], silent["ended_by_run_id"]) == (43200.0, None)
    page = client.get("/alerts", params={"group": group["id"]})
    assert "machine silent" in page.text
    assert "it ran every 12.0 h" in page.text
    triage = {"Authorization": f"Bearer {make_token(database, 'triage', name='oncall')}"}
    changed = client.patch(
        f"/api/v1/alert-groups/{group['id']}", json={"status": "acknowledged"}, headers=triage
    )
    assert changed.json()["status"] == "acknowledged"
    assert changed.json()["silences"][0]["status"] == "acknowledged"
