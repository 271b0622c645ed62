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


def connect(settings: Settings) -> tuple[Database, queue.Publisher]:
    """The database and where its sessions publish tasks.

    Celery when a broker is configured, else a runner in this process.
    """
    database = Database(settings.DATABASE_URL)
    publisher: queue.Publisher
    if settings.BROKER_URL:
        publisher = queue.CeleryPublisher(settings.BROKER_URL)
    else:
        publisher = queue.InProcessPublisher(job_table(database, settings))
    database.set_publisher(publisher)
    return database, publisher


def disconnect(database: Database, publisher: queue.Publisher) -> None:
    """Let in-process jobs finish, then close the database's connections."""
    if isinstance(publisher, queue.InProcessPublisher):
        publisher.close()
    database.dispose()
