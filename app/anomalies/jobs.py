"""Anomaly jobs: what the tasks ``app.jobs`` declares for detection do."""

import logging
import time
from collections.abc import Sequence
from datetime import timedelta
from functools import partial

from prometheus_client import Histogram
from sqlalchemy.exc import IntegrityError, OperationalError

from app.anomalies import service, silence
from app.anomalies.detector_interface import Thresholds
from app.core.bounds import in_id_range
from app.core.config import Schedule
from app.core.db import Database
from app.core.metrics import after_commit
from app.core.queue import enqueue_after_commit
from app.jobs import DETECT_RUN
from app.runs import shards
from app.runs.models import Run

log = logging.getLogger(__name__)
ATTEMPTS = 5  # of one detection that collides with concurrent ones
# From an in-process detection (under a second) to a backlog of hours (docs/metrics.md).
DETECTION_LAG = Histogram(
    "benchwatch_detection_lag_seconds",
    "From a run's upload to the end of its first detection",
    buckets=(0.25, 0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400),
)


def detect_run(database: Database, thresholds: Thresholds, *, run_id: int) -> None:
    """Detect steps after a run was ingested; safe to repeat (findings are not duplicated).

    A detection that collides with a concurrent one (SQLite: a stale snapshot or the unique
    step it recorded first; anywhere: a deadlock) runs again, and then sees what the other
    one committed.
    """
    for attempt in range(1, ATTEMPTS + 1):
        try:
            with database.session_scope() as session:
                run = session.get(Run, run_id) if in_id_range(run_id) else None
                first = run is not None and run.detected_at is None
                found = service.detect_for_run(session, run_id, thresholds)
                if first and run is not None and run.detected_at is not None:
                    lag = (run.detected_at - run.created_at).total_seconds()
                    after_commit(session, partial(DETECTION_LAG.observe, max(lag, 0.0)))
                log.info(
                    "run %s: %d new finding(s), %d reverted",
                    run_id,
                    len(found.regressions),
                    len(found.reverted),
                )
            return
        except (OperationalError, IntegrityError):
            if attempt == ATTEMPTS:
                raise  # the sweep queues it again later
            log.info("run %s: detection collided with another, again (%d)", run_id, attempt)
            time.sleep(0.1 * attempt)


def sweep_detection(database: Database, *, overdue_s: float, shards_quiet_s: float = 1800.0) -> int:
    """Queue detection again for runs still undetected ``overdue_s`` after they were stored.

    First, a sharded run no shard came to for ``shards_quiet_s`` is complete: it is queued
    too. Returns how many; each is published after the commit, and a publish that fails
    again is logged and retried by the next sweep (detection is idempotent, so a duplicate
    costs time only).
    """
    with database.session_scope() as session:
        completed = shards.complete_quiet_runs(session, timedelta(seconds=shards_quiet_s))
        for run_id in completed:
            enqueue_after_commit(session, DETECT_RUN, run_id=run_id)
        if completed:
            log.info("sharded run(s) complete, no shard for a while: %s", completed)
        overdue = service.overdue_runs(session, timedelta(seconds=overdue_s))
        for run_id in overdue:
            enqueue_after_commit(session, DETECT_RUN, run_id=run_id)
    if overdue:
        log.warning("detection overdue for %d run(s), queued again: %s", len(overdue), overdue)
    return len(overdue)


def sweep_silence(database: Database, *, schedules: Sequence[Schedule] = ()) -> int:
    """Open a finding for each machine and channel that stopped reporting; how many.

    ``schedules`` (``Settings.SCHEDULES``) say when scheduled machines are due to run; the
    others are judged by the cadence learned from their runs.
    """
    scheduled = {(s.machine, s.channel) for s in schedules}
    with database.session_scope() as session:
        opened = silence.open_silences(session, schedules=schedules)
        for found in opened:
            log.warning(
                "machine %s (%s) silent since %s (runs every %s s, from its %s)",
                found.machine.name,
                found.channel,
                found.silent_since,
                round(found.expected_every_s),
                "schedule" if (found.machine.name, found.channel) in scheduled else "history",
            )
    return len(opened)
