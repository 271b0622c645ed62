"""Anomaly tasks."""

from functools import cache

from sqlalchemy.exc import OperationalError

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
    acks_late=True,
    autoretry_for=(OperationalError,),
    retry_backoff=True,
    max_retries=5,
    soft_time_limit=600,
)
def detect_run(*, run_id: int) -> None:
    """Score every series a run touched; safe to repeat (findings are not duplicated)."""
    jobs.detect_run(worker_database(), settings.DETECTOR_THRESHOLDS, run_id=run_id)
