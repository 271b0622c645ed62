"""The background jobs by task name, and the publisher that sends them where they run."""

from collections.abc import Callable
from functools import partial

from app.anomalies import jobs as anomalies_jobs
from app.core import queue
from app.core.config import Settings
from app.core.db import Database


def job_table(database: Database, settings: Settings) -> dict[str, Callable[..., None]]:
    """Each task name's job, bound to a database and the settings it needs."""
    return {
        queue.DETECT_RUN: partial(
            anomalies_jobs.detect_run, database, settings.DETECTOR_THRESHOLDS
        ),
    }


def make_publisher(database: Database, settings: Settings) -> queue.Publisher:
    """Celery when a broker is configured, else a runner in this process."""
    if settings.BROKER_URL:
        return queue.CeleryPublisher(settings.BROKER_URL)
    return queue.InProcessPublisher(job_table(database, settings))
