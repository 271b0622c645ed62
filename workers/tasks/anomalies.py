"""Anomaly tasks."""

from functools import cache

from sqlalchemy.exc import IntegrityError, OperationalError

from app.anomalies import jobs
from app.core import queue
from app.core.config import settings
from app.core.db import Database
from app.jobs import connect
from workers.celery_app import celery_app


@cache
def worker_database() -> Database:
    """The worker process's database; tasks it queues go back to the broker."""
    database, _ = connect(settings)
    return database


@celery_app.task(
    name=queue.DETECT_RUN,
    # Acknowledged when done: a worker killed mid-task leaves the message to be delivered
    # again (its pool child lost: at once; the whole worker: after the broker's visibility
    # timeout, and sooner through the sweep).
    acks_late=True,
    reject_on_worker_lost=True,
    # A lost connection, a deadlock, a serialisation failure or a unique conflict with a
    # concurrent detection: try again, and the retry sees what the other one committed.
    autoretry_for=(OperationalError, IntegrityError),
    retry_backoff=True,
    max_retries=5,
    soft_time_limit=600,
)
def detect_run(*, run_id: int) -> None:
    """Score every series a run touched; safe to repeat (findings are not duplicated)."""
    jobs.detect_run(worker_database(), settings.DETECTOR_THRESHOLDS, run_id=run_id)


@celery_app.task(name=queue.SWEEP_DETECTION, ignore_result=True)
def sweep_detection() -> int:
    """Queue detection again for runs whose task was lost (beat runs this every few minutes)."""
    return jobs.sweep_detection(worker_database(), overdue_s=settings.DETECTION_OVERDUE_S)
