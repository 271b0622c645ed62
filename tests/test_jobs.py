"""Every background task is declared once, in app.jobs (issue 13, point 3): Celery registers
each with its queue and options, the in-process runner has each job, publishers and beat send
each to its queue, and no task or queue name is spelled anywhere else."""

import re
import time
from pathlib import Path
from typing import Any

import pytest
from celery import Task as CeleryTask

from app.core.config import Settings
from app.core.db import Database
from app.core.queue import CeleryPublisher
from app.jobs import (
    APPLY_RETENTION,
    DEFAULT_QUEUE,
    DELIVER,
    DETECT_RUN,
    DISPATCH_NOTICES,
    KEEP_UP_PARTITIONS,
    LOCALIZE,
    NOTIFY_QUEUE,
    POLL_ISSUES,
    REQUEUE_SHARDS,
    RUN_SHARD,
    START_SUITE,
    SWEEP_DETECTION,
    SWEEP_SILENCE,
    TASKS,
    Sweeper,
)
from workers.celery_app import celery_app

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted(path for top in ("app", "workers") for path in (ROOT / top).rglob("*.py"))
REGISTRY = ROOT / "app" / "jobs.py"
# What running workers and brokers know the tasks by: a renamed task strands its messages.
ON_THE_WIRE = {
    "anomalies.detect_run",
    "anomalies.sweep_detection",
    "anomalies.sweep_silence",
    "bench.start_suite",
    "bench.run_shard",
    "bench.requeue_shards",
    "bench.localize",
    "notifications.dispatch",
    "notifications.deliver",
    "runs.keep_up_partitions",
    "runs.apply_retention",
    "notifications.poll_issues",
}
AUTORETRY = {"autoretry_for", "dont_autoretry_for", "retry_kwargs", "retry_backoff"}


def test_the_names_on_the_wire_stay() -> None:
    assert {task.name for task in TASKS} == ON_THE_WIRE


def test_celery_registers_every_task_with_its_declared_options() -> None:
    celery_app.loader.import_default_modules()  # what a worker imports at start (`include`)
    for task in TASKS:
        registered = celery_app.tasks[task.name]
        for option, value in task.options.items():
            # a misspelt option would be set, and read by nothing
            assert hasattr(CeleryTask, option) or option in AUTORETRY, option
            assert getattr(registered, option) == value, (task.name, option)
    assert celery_app.tasks[DETECT_RUN].acks_late  # options do arrive


@pytest.mark.parametrize(
    ("name", "kwargs", "queue"),
    [
        (DETECT_RUN, {"run_id": 1}, DEFAULT_QUEUE),
        (SWEEP_DETECTION, {}, DEFAULT_QUEUE),
        (DISPATCH_NOTICES, {}, DEFAULT_QUEUE),
        (SWEEP_SILENCE, {}, DEFAULT_QUEUE),
        (DELIVER, {"delivery_id": 1}, NOTIFY_QUEUE),
        (START_SUITE, {"machine": "h100-a", "tier": "daily"}, "bench.h100-a"),
        (REQUEUE_SHARDS, {}, DEFAULT_QUEUE),  # every machine's shards: the service's worker
        (REQUEUE_SHARDS, {"machine": "h100-a"}, "bench.h100-a"),
        (LOCALIZE, {"localization_id": 1, "machine": "h100-a"}, "bench.h100-a"),
    ],
)
def test_celery_routes_each_call_to_its_declared_queue(
    name: str, kwargs: dict[str, Any], queue: str
) -> None:
    assert TASKS.queue_for(name, **kwargs) == queue
    routed = celery_app.amqp.router.route({}, name, (), kwargs)
    assert routed["queue"].name == queue
    explicit = celery_app.amqp.router.route({"queue": "bench.b"}, name, (), kwargs)
    assert explicit["queue"].name == "bench.b"  # a sender that names the queue is obeyed


def test_the_in_process_runner_has_every_job(database: Database, settings: Settings) -> None:
    jobs = TASKS.jobs(database, settings)
    assert (
        set(jobs)
        == {task.name for task in TASKS if task.job}
        == {
            DETECT_RUN,
            SWEEP_DETECTION,
            SWEEP_SILENCE,
            DISPATCH_NOTICES,
            DELIVER,
            KEEP_UP_PARTITIONS,
            APPLY_RETENTION,
            POLL_ISSUES,
        }
    )
    assert jobs[POLL_ISSUES]() == []  # no bug link names a GitHub issue
    assert jobs[APPLY_RETENTION]().summary()["runs_deleted"] == 0  # settings at 0: keep all
    assert jobs[KEEP_UP_PARTITIONS]() == []  # SQLite; Postgres has its months ahead already
    assert jobs[SWEEP_SILENCE]() == 0
    assert jobs[SWEEP_DETECTION]() == 0  # its job, bound to the database and its settings
    assert jobs[DISPATCH_NOTICES]().sent == 0
    assert jobs[DELIVER](delivery_id=1) == "skipped"  # no such delivery to claim
    with pytest.raises(LookupError, match="benchmark worker"):
        TASKS[RUN_SHARD].bind(database, settings)


def test_the_api_publishes_each_task_to_its_declared_queue(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert TASKS.queue_for(RUN_SHARD, machine="h100-a") == "bench.h100-a"  # its sender's machine
    sent: list[tuple[str, str]] = []
    publisher = CeleryPublisher("memory://", TASKS.queue_for)

    def send_task(name: str, *, queue: str, **_: Any) -> None:
        sent.append((name, queue))

    monkeypatch.setattr(publisher.client, "send_task", send_task)
    publisher.publish(REQUEUE_SHARDS, {"machine": "mi300x-b"})
    publisher.publish(DETECT_RUN, {"run_id": 1})
    assert sent == [(REQUEUE_SHARDS, "bench.mi300x-b"), (DETECT_RUN, DEFAULT_QUEUE)]


def test_each_task_name_is_spelled_once() -> None:
    for task in TASKS:
        spelled = re.compile(rf"[\"']{re.escape(task.name)}[\"']")
        where = [str(path) for path in SOURCES for _ in spelled.finditer(path.read_text())]
        assert len(where) == 1, (task.name, where)


def test_no_queue_is_spelled_outside_the_registry() -> None:
    literal = re.compile(r"queues?[\"']?\s*[=:]\s*\[?\s*f?[\"']")  # queue="..", "queue": f"..
    where = [
        f"{path}:{number}: {line.strip()}"
        for path in SOURCES
        if path != REGISTRY
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if literal.search(line)
    ]
    assert where == []


class Recording:
    """A publisher that keeps what it was sent, and when (the Publisher protocol)."""

    def __init__(self) -> None:
        self.sent: dict[str, float] = {}

    def publish(self, name: str, kwargs: dict[str, Any]) -> None:
        self.sent.setdefault(name, time.monotonic())


def test_an_in_process_sweep_runs_at_once_and_the_upkeep_only_after_its_wait() -> None:
    publisher = Recording()
    started = time.monotonic()
    sweep = Sweeper(publisher, SWEEP_DETECTION, 60.0)
    upkeep = Sweeper(publisher, KEEP_UP_PARTITIONS, 60.0, first_after_s=0.5)
    try:
        deadline = time.monotonic() + 10
        while KEEP_UP_PARTITIONS not in publisher.sent and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        sweep.stop()
        upkeep.stop()
    assert SWEEP_DETECTION in publisher.sent  # at once
    assert publisher.sent[KEEP_UP_PARTITIONS] - started >= 0.5
    waiting = Sweeper(publisher, APPLY_RETENTION, 60.0, first_after_s=60.0)
    waiting.stop()  # before its first run: it stops at once, having sent nothing
    assert APPLY_RETENTION not in publisher.sent
