"""Suite tasks: bounded retries of a failing shard (then its cases fail with the reason), and
beat's schedule."""

from typing import Any

import pytest
from pydantic import ValidationError
from sqlalchemy import select

from app.core.config import Settings
from app.core.db import Database
from app.runs.models import Result, Run
from app.suite_runs.models import SuiteShard
from tests.suite_runs.test_service import measured, open_run
from workers.celery_app import beat_schedule
from workers.shard_runner import ShardOutcome
from workers.tasks import suite


@pytest.fixture
def eager_tasks(database: Database, monkeypatch: pytest.MonkeyPatch) -> Database:
    """Tasks run here with ``apply`` (retries too), on the test database."""
    monkeypatch.setattr(suite, "worker_database", lambda: database)
    return database


def test_a_shard_that_keeps_crashing_is_tried_a_bounded_number_of_times(
    eager_tasks: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = open_run(eager_tasks)
    attempts: list[dict[str, Any]] = []

    def crashes(spec: dict[str, Any], **_: Any) -> ShardOutcome:
        attempts.append(spec)
        return ShardOutcome(None, "the shard process was killed by SIGSEGV")

    monkeypatch.setattr(suite, "run_shard_process", crashes)
    suite.run_shard.apply(kwargs={"shard_id": first})
    assert len(attempts) == suite.settings.SHARD_ATTEMPTS
    with eager_tasks.session_scope() as session:
        shard = session.get(SuiteShard, first)
        assert shard is not None
        assert (shard.status, shard.attempts) == ("failed", suite.settings.SHARD_ATTEMPTS)
        assert shard.reason == "failed 3 times; last: the shard process was killed by SIGSEGV"
        assert session.scalar(select(Run)) is None  # the other shard is still to run

    monkeypatch.setattr(suite, "run_shard_process", lambda spec, **_: ShardOutcome(rows(spec)))
    suite.run_shard.apply(kwargs={"shard_id": second})
    with eager_tasks.session_scope() as session:
        run = session.scalar(select(Run))
        assert run is not None
        assert (run.cases_attempted, run.cases_passed, run.cases_failed) == (2, 1, 1)
        failed = session.scalar(select(Result).where(Result.status == "failed"))
        assert failed is not None
        assert "SIGSEGV" in failed.reason


def rows(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [row for case in spec["cases"] for row in measured(case["model"], 3.0)]


def test_a_shard_that_fails_once_passes_on_the_retry(
    eager_tasks: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, _ = open_run(eager_tasks)
    outcomes = [ShardOutcome(None, "did not finish within 60 s"), None]

    def flaky(spec: dict[str, Any], **_: Any) -> ShardOutcome:
        return outcomes.pop(0) or ShardOutcome(rows(spec))

    monkeypatch.setattr(suite, "run_shard_process", flaky)
    suite.run_shard.apply(kwargs={"shard_id": first})
    with eager_tasks.session_scope() as session:
        shard = session.get(SuiteShard, first)
        assert shard is not None
        assert (shard.status, shard.attempts, len(shard.rows or [])) == ("done", 2, 2)


def test_beat_schedules_a_suite_run_per_machine_on_its_cron() -> None:
    config = Settings(
        SCHEDULES=[
            {"machine": "h100-a", "tier": "daily"},
            {"machine": "mi300x-b", "tier": "smoke", "cron": "30 6 * * 1-5", "channel": "rc"},
        ]
    )
    entries = beat_schedule(config)
    assert set(entries) == {
        "sweep-detection",
        "dispatch-notices",
        "sweep-silence",
        "keep-up-partitions",
        "apply-retention",
        "poll-issues",
        "suite-h100-a-daily",
        "suite-mi300x-b-smoke",
        "requeue-shards",
    }
    sweeper = entries["requeue-shards"]  # every machine's shards, triggered ones too
    assert (sweeper.get("kwargs"), sweeper["options"]) == (None, {"queue": "default"})
    h100 = entries["suite-h100-a-daily"]
    assert h100["options"] == {"queue": "bench.h100-a"}
    assert h100["schedule"].hour == set(range(0, 24, 12))  # every 12 hours by default
    assert h100["schedule"].minute == {0}
    mi300x = entries["suite-mi300x-b-smoke"]
    assert mi300x["kwargs"] == {"machine": "mi300x-b", "tier": "smoke", "channel": "rc"}
    assert mi300x["schedule"].day_of_week == {1, 2, 3, 4, 5}
    assert (mi300x["schedule"].hour, mi300x["schedule"].minute) == ({6}, {30})
    assert set(beat_schedule(Settings(SCHEDULES=[]))) == {
        "sweep-detection",
        "dispatch-notices",
        "sweep-silence",
        "keep-up-partitions",
        "apply-retention",
        "poll-issues",
        "requeue-shards",
    }
    assert entries["apply-retention"]["schedule"] == 86400.0
    notices = entries["dispatch-notices"]
    assert (notices["task"], notices["schedule"], notices["options"]) == (
        "notifications.dispatch",
        30.0,
        {"queue": "default"},
    )
    sweep = entries["sweep-detection"]
    assert (sweep["task"], sweep["schedule"], sweep["options"]) == (
        "anomalies.sweep_detection",
        300.0,
        {"queue": "default"},
    )


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        ({"machine": "a", "cron": "every day"}, "should match pattern"),
        ({"machine": "bad name"}, "should match pattern"),
        ({"machine": "a", "models": []}, "at least 1 item"),
        ({"machine": "a", "models": ["resnet", "bad model"]}, "should match pattern"),
    ],
)
def test_a_bad_schedule_is_refused_with_what_is_wrong(
    schedule: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        Settings(SCHEDULES=[schedule])


def test_schedules_of_one_tier_with_their_own_models_are_two_entries() -> None:
    """Operators every hour and two models nightly, on one machine and tier."""
    config = Settings(
        SCHEDULES=[
            {"machine": "h100-a", "tier": "daily", "cron": "0 * * * *", "models": ["softmax"]},
            {"machine": "h100-a", "tier": "daily", "models": ["resnet", "bert"]},
        ]
    )
    entries = beat_schedule(config)
    hourly = entries["suite-h100-a-daily-softmax"]
    assert hourly["kwargs"] == {
        "machine": "h100-a",
        "tier": "daily",
        "channel": "nightly",
        "models": ["softmax"],
    }
    assert hourly["schedule"].hour == set(range(24))
    assert entries["suite-h100-a-daily-resnet+bert"]["kwargs"]["models"] == ["resnet", "bert"]


def test_beat_refuses_a_schedule_of_an_unknown_tier() -> None:
    with pytest.raises(ValueError, match="machine 'a' has unknown tier 'weekly'; one of test"):
        beat_schedule(Settings(SCHEDULES=[{"machine": "a", "tier": "weekly"}]))
