"""Silent machines: a machine that misses two of its usual intervals opens a finding."""

from datetime import UTC, datetime, timedelta

from fastapi.testclient import TestClient
from sqlalchemy import delete, select

from app.anomalies import jobs, silence
from app.anomalies.models import AlertGroup, MachineSilence
from app.core.config import Schedule, Settings
from app.core.db import Database, utcnow
from app.jobs import SWEEP_SILENCE, TASKS
from app.runs.models import Run
from tests.anomalies.test_failures import nightly
from tests.conftest import make_token
from tests.factories import result, run_payload
from tests.posting import post_detected


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


# --- scheduled machines ---------------------------------------------------------------------

TWICE_A_DAY = Schedule(machine="h100-8", cron="0 */12 * * *", channel="nightly")


def run_at(
    client: TestClient, headers: dict[str, str], started_at: datetime, machine: str = "h100-8"
) -> int:
    """A nightly run of ``machine`` started at ``started_at``, detected."""
    key = f"{machine}-{started_at:%Y%m%dT%H%M}"
    rows = [result(value=10.0, samples=[9.9, 10.0, 10.1])]
    payload = run_payload(key, rows, machine=machine, started_at=started_at.isoformat())
    return post_detected(client, headers, payload)


def opened_at(database: Database, now: datetime, *schedules: Schedule) -> list[MachineSilence]:
    with database.session_scope() as session:
        return silence.open_silences(session, now, schedules)


def test_a_new_scheduled_machine_is_silent_after_two_missed_fire_times_and_grace(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    first = datetime(2026, 1, 1, 0, 10, tzinfo=UTC)  # beat fired at 00:00
    run_at(client, ingest_headers, first)
    last = run_at(client, ingest_headers, first + timedelta(hours=12))
    # Two runs: no learned cadence, so nothing without the schedule, however long it waits.
    assert opened_at(database, datetime(2026, 1, 5, tzinfo=UTC)) == []
    with database.session_scope() as session:
        (cadence,) = silence.cadences(session, [TWICE_A_DAY])
        assert (cadence.source, cadence.every) == ("schedule", timedelta(hours=12))
    # Missed 2026-01-02 00:00: one fire time, long past its grace, is not a silence.
    assert opened_at(database, datetime(2026, 1, 2, 11, 59, tzinfo=UTC), TWICE_A_DAY) == []
    # Missed 12:00 too: silent once its grace (half the interval) is over, not before.
    assert opened_at(database, datetime(2026, 1, 2, 17, 59, tzinfo=UTC), TWICE_A_DAY) == []
    (opened,) = opened_at(database, datetime(2026, 1, 2, 18, 1, tzinfo=UTC), TWICE_A_DAY)
    assert (opened.last_run_id, opened.expected_every_s) == (last, 43200.0)
    assert opened.silent_since == first + timedelta(hours=12)
    # Retired after two weeks, like any machine.
    assert opened_at(database, datetime(2026, 1, 16, tzinfo=UTC), TWICE_A_DAY) == []


def test_a_daily_run_that_started_late_is_not_silent_later_that_day(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    daily = Schedule(machine="h100-8", cron="0 2 * * *", channel="nightly")
    ran = datetime(2026, 1, 5, 2, 10, tzinfo=UTC)
    for hours in (3, 2, 1, 0):  # hourly before (manual runs): learned, it would be silent
        run_at(client, ingest_headers, ran - timedelta(hours=hours))
    evening = ran.replace(hour=23, minute=0)
    assert len(opened_at(database, evening)) == 1  # learned: silent at 04:40
    with database.session_scope() as session:
        session.execute(delete(MachineSilence))
        session.execute(delete(AlertGroup))
    assert opened_at(database, evening, daily) == []
    # Missed the next two days' runs: silent half a day after the second.
    assert opened_at(database, ran + timedelta(days=2, hours=11), daily) == []
    (opened,) = opened_at(database, ran + timedelta(days=2, hours=12), daily)
    assert opened.expected_every_s == 86400.0


def test_a_weekday_schedule_is_not_silent_over_the_weekend(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    weekdays = Schedule(machine="h100-8", cron="30 6 * * 1-5", channel="nightly")
    monday = datetime(2026, 1, 5, 6, 40, tzinfo=UTC)
    for day in range(5):
        run_at(client, ingest_headers, monday + timedelta(days=day))
    next_monday = monday + timedelta(days=7)
    assert len(opened_at(database, next_monday)) == 1  # learned (daily): silent on Sunday
    with database.session_scope() as session:
        session.execute(delete(MachineSilence))
        session.execute(delete(AlertGroup))
    assert opened_at(database, next_monday + timedelta(hours=12), weekdays) == []
    (opened,) = opened_at(database, next_monday + timedelta(days=1, hours=12), weekdays)
    assert opened.expected_every_s == 86400.0  # the median: most intervals are a day


def test_an_unscheduled_machine_or_channel_keeps_the_learned_rule(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    for index in range(5):  # h100-8's nightly, every 12 hours
        nightly(client, ingest_headers, index, {})
    last = last_started(database)
    schedules = (
        Schedule(machine="h100-8", cron="0 2 * * 1", channel="rc"),  # another channel
        Schedule(machine="a100-1", cron="0 */12 * * *", channel="nightly"),  # never ran
    )
    with database.session_scope() as session:
        (cadence,) = silence.cadences(session, schedules)
        assert (cadence.source, cadence.every) == ("history", timedelta(hours=12))
    assert opened_at(database, last.started_at + timedelta(hours=29), *schedules) == []
    (opened,) = opened_at(database, last.started_at + timedelta(hours=31), *schedules)
    assert opened.last_run_id == last.id


def test_the_sweep_reads_the_schedules_from_the_settings(
    client: TestClient, database: Database, ingest_headers: dict[str, str], settings: Settings
) -> None:
    start = recently(runs=2)  # two runs, the last 3 days ago: silent by its schedule only
    for index in range(2):
        nightly(client, ingest_headers, index, {}, start)
    assert jobs.sweep_silence(database) == 0
    scheduled = settings.model_copy(update={"SCHEDULES": [TWICE_A_DAY]})
    assert TASKS.jobs(database, scheduled)[SWEEP_SILENCE]() == 1
    assert jobs.sweep_silence(database, schedules=[TWICE_A_DAY]) == 0  # once per silence
