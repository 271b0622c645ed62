"""Real Celery workers on Redis and Postgres: a scheduled suite run end to end, and a worker
killed in the middle of a shard (nothing lost, nothing doubled)."""

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psutil
import pytest
from celery import Celery
from celery.beat import PersistentScheduler
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.core.config import Settings
from app.core.db import Database
from app.main import create_app
from app.runs.models import Result, Run
from app.suite_runs.models import SuiteRun, SuiteShard
from tests.conftest import PEPPER
from workers.celery_app import beat_schedule
from workers.shard_runner import CHILD


def environment(database: Database, redis_url: str, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "BENCHWATCH_DATABASE_URL": database.url,
        "BENCHWATCH_BROKER_URL": redis_url,
        "BENCHWATCH_LOG_LEVEL": "INFO",
        **extra,
    }


@contextmanager
def benchwatch(
    args: list[str], env: dict[str, str], log: Path
) -> Iterator[subprocess.Popen[bytes]]:
    """A ``benchwatch`` command in its own process group, stopped at the end."""
    with log.open("a") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "workers.cli", *args],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            yield process
        finally:
            for shard in shard_children(process.pid):  # each leads its own process group
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(shard.pid, signal.SIGKILL)
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(timeout=60)


def wait_for(what: str, check: Callable[[], bool], timeout_s: float, log: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}:\n{log.read_text()[-4000:]}")
        time.sleep(0.3)


def ticked_before(schedule_file: Path, config: Settings, name: str) -> None:
    """Beat's schedule file as a beat that last sent entry ``name`` two minutes ago left it.

    A beat started afresh counts a cron entry's last run from its own start, so it waits for
    the next minute boundary (up to 60 s, more on a loaded machine). From this file it finds a
    boundary passed since the last run and sends at once: the cron is still what makes the
    entry due, as for a beat restarted after missing a tick.
    """
    seeding = Celery("benchwatch-test", broker="memory://")
    seeding.conf.update(beat_schedule=beat_schedule(config), timezone="UTC")
    scheduler = PersistentScheduler(app=seeding, schedule_filename=str(schedule_file))
    scheduler.schedule[name].last_run_at = datetime.now(UTC) - timedelta(minutes=2)
    scheduler.close()  # synced to the file


def finished(database: Database) -> bool:
    with database.session_scope() as session:
        done = select(func.count()).where(SuiteRun.run_id.is_not(None))
        return bool(session.scalar(done))


def detected(database: Database) -> bool:
    with database.session_scope() as session:
        return session.scalar(select(func.count()).where(Run.detected_at.is_not(None))) == 1


@pytest.mark.slow
def test_beat_and_a_worker_run_the_suite_and_detection_follows(
    postgres_database: Database, redis_url: str, tmp_path: Path
) -> None:
    # Four shards: an operator (and its config a CPU skips), a model's inference and training
    # step, a collective. Every category's measurement is tests/workers/test_models.py's.
    models = ["softmax", "resnet", "all_reduce"]
    schedules = [{"machine": "ci-box", "tier": "test", "cron": "* * * * *", "models": models}]
    env = environment(postgres_database, redis_url, BENCHWATCH_SCHEDULES=json.dumps(schedules))
    log = tmp_path / "workers.log"
    schedule_file = tmp_path / "beat-schedule"
    entry = "suite-ci-box-test-softmax+resnet+all_reduce"
    ticked_before(schedule_file, Settings(SCHEDULES=schedules), entry)
    beat_args = ["beat", "--schedule-file", str(schedule_file)]
    with (
        benchwatch(["worker", "--machine", "ci-box", "--queues", "default"], env, log),
        benchwatch(beat_args, env, log) as beat,
    ):
        sent = f"Sending due task {entry}"
        wait_for("beat to send the suite run", lambda: sent in log.read_text(), 150, log)
        # Stopped once the worker has the task: beat logs "Sending" before it publishes, and
        # a SIGTERM in between lost the message once (a CI run then waited its 10 minutes).
        received = re.compile(r"Task bench\.start_suite\[[^\]]+\] received")
        wait_for("the worker to get it", lambda: bool(received.search(log.read_text())), 90, log)
        os.killpg(beat.pid, signal.SIGTERM)  # one scheduled run is enough
        wait_for("the suite run to finish", lambda: finished(postgres_database), 600, log)
        wait_for("detection", lambda: detected(postgres_database), 60, log)

    settings = Settings(DATABASE_URL=postgres_database.url, TOKEN_PEPPER=PEPPER)
    application = create_app(settings)
    with TestClient(application) as client:
        (run,) = client.get("/api/v1/runs").json()["items"]
        assert (run["trigger"], run["tier"]) == ("schedule", "test")
        assert run["machine"]["name"] == "ci-box"
        rows = client.get(f"/api/v1/runs/{run['id']}").json()["results"]
    application.state.database.dispose()
    by_metric: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_metric.setdefault(row["metric"], []).append(row)
    assert {row["model"] for row in rows} == set(models)
    for metric in ("throughput", "latency_p99", "peak_memory", "kernel_count", "host_rss"):
        assert metric in by_metric, metric
    assert by_metric["allreduce_bus_bandwidth"]
    skipped = [r for r in rows if r["status"] == "skipped"]
    assert skipped
    assert all("need a GPU" in r["reason"] for r in skipped)
    assert {r["mode"] for r in by_metric["latency"]} == {"inference", "training"}


@pytest.mark.slow
def test_a_worker_killed_mid_shard_loses_nothing_and_doubles_nothing(
    postgres_database: Database, redis_url: str, tmp_path: Path
) -> None:
    env = environment(postgres_database, redis_url, BENCHWATCH_SHARD_LEASE_S="3")
    log = tmp_path / "workers.log"
    worker = ["worker", "--machine", "kill-box", "--queues", "default"]
    trigger = ["trigger", "--machine", "kill-box", "--tier", "test", "--models", "resnet,softmax"]
    with benchwatch(worker, env, log) as first:
        subprocess.run(
            [sys.executable, "-m", "workers.cli", *trigger], env=env, check=True, timeout=60
        )
        wait_for("a shard to start", lambda: bool(shard_children(first.pid)), 120, log)
        orphans = shard_children(first.pid)
        os.killpg(first.pid, signal.SIGKILL)  # the worker dies mid-shard
        first.wait()
        wait_for(
            "the orphaned shard to exit", lambda: not any(p.is_running() for p in orphans), 30, log
        )
        with postgres_database.session_scope() as session:
            killed = session.scalars(select(SuiteShard).where(SuiteShard.status == "running")).one()
            killed_id = killed.id
    with benchwatch(worker, env, log):  # restarted: the shard runs again
        wait_for("the suite run to finish", lambda: finished(postgres_database), 300, log)

    with postgres_database.session_scope() as session:
        shards = session.scalars(select(SuiteShard).order_by(SuiteShard.id)).all()
        assert {shard.status for shard in shards} == {"done"}
        assert {s.id: s.attempts for s in shards}[killed_id] == 2
        assert session.scalar(select(func.count()).select_from(Run)) == 1
        stored = session.scalar(select(func.count()).select_from(Result))
        assert stored == sum(len(shard.rows or []) for shard in shards)
        assert session.scalar(select(func.count()).where(Result.status == "failed")) == 0
        run = session.scalars(select(Run)).one()
        assert (run.cases_attempted, run.cases_failed) == (4, 0)  # 3 ran, 1 skipped on a CPU


def shard_children(worker_pid: int) -> list[psutil.Process]:
    """The shard processes below a worker (its pool child's ``python -m workers.shard_child``)."""
    try:
        below = psutil.Process(worker_pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    return [p for p in below if CHILD in " ".join(safe_cmdline(p))]


def safe_cmdline(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except psutil.Error:
        return []
