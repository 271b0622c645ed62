"""The background jobs by task name, and the publisher that sends them where they run."""

import logging
import threading
from collections.abc import Callable
from functools import partial

from app.anomalies import jobs as anomalies_jobs
from app.core import queue
from app.core.config import Settings
from app.core.db import Database


def job_table(database: Database, settings: Settings) -> dict[str, Callable[..., object]]:
    """Each task name's job, bound to a database and the settings it needs."""
    return {
        queue.DETECT_RUN: partial(
            anomalies_jobs.detect_run, database, settings.DETECTOR_THRESHOLDS
        ),
        queue.SWEEP_DETECTION: partial(
            anomalies_jobs.sweep_detection, database, overdue_s=settings.DETECTION_OVERDUE_S
        ),
    }


log = logging.getLogger(__name__)


class Sweeper:
    """In process, what beat does with a broker: the detection sweep, now and every interval.

    A server killed with detections queued in its memory loses them; the sweep at the next
    start queues them again.
    """

    def __init__(self, publisher: queue.Publisher, every_s: float) -> None:
        self.publisher = publisher
        self.every_s = every_s
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="benchwatch-sweep", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while True:
            try:
                self.publisher.publish(queue.SWEEP_DETECTION, {})
            except Exception:  # the publisher is closing: the next server's sweep catches up
                log.exception("could not queue the detection sweep")
            if self.stopped.wait(self.every_s):
                return

    def stop(self) -> None:
        """No more sweeps (the one queued last still runs)."""
        self.stopped.set()
        self.thread.join()


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
