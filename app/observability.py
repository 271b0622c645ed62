"""What ``/metrics`` reads at scrape time: the work waiting, in the database and in this process.

Counters are kept where the work is done (each domain's module); the gauges here are read when
Prometheus asks. The database's counts (runs awaiting detection, deliveries not yet delivered,
suite shards not finished) say how far behind the background work is whatever runs it (Celery
workers or this process), so they are the queue depth an operator watches; they are cached
for ``CACHE_S`` and bounded by a statement timeout, so frequent or concurrent scrapes cost
the database little. With the in-process publisher (no broker), its lanes' pending jobs are
reported too.
"""

import logging
import threading
import time
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from sqlalchemy import func, select, text

from app.core.db import Database
from app.core.queue import InProcessPublisher, Publisher
from app.notifications.models import Delivery
from app.runs.models import Run
from app.runs.shards import COMPLETED
from app.suite_runs.models import SuiteShard

log = logging.getLogger(__name__)
CACHE_S = 15.0  # the database is counted at most this often, however often it is scraped
STATEMENT_TIMEOUT_MS = 2000  # Postgres: a count slower than this is given up (no gauge)


class WorkWaiting:
    """A prometheus-client collector of the waiting work (see the module's docstring)."""

    def __init__(self, database: Database, publisher: Publisher) -> None:
        self.database = database
        self.publisher = publisher
        self.lock = threading.Lock()
        self.counted: dict[str, int] | None = None
        self.counted_at = float("-inf")

    def collect(self) -> Iterator[Metric]:
        """The gauges; the database's are left out when it does not answer."""
        waiting = self._counts()
        if waiting is not None:
            gauge = GaugeMetricFamily(
                "benchwatch_work_waiting",
                "Work stored and not done yet: runs awaiting detection, notification "
                "deliveries not yet delivered, suite shards pending or running",
                labels=["work"],
            )
            for work, count in sorted(waiting.items()):
                gauge.add_metric([work], count)
            yield gauge
        if isinstance(self.publisher, InProcessPublisher):
            lanes = GaugeMetricFamily(
                "benchwatch_inprocess_queue_depth",
                "Jobs queued in this server process, by queue (no broker configured)",
                labels=["queue"],
            )
            with self.publisher.lock:
                executors = dict(self.publisher.lanes)
            for lane, executor in sorted(executors.items()):
                pending = getattr(executor, "_work_queue", None)
                lanes.add_metric([lane], pending.qsize() if pending is not None else 0)
            yield lanes

    def _counts(self) -> dict[str, int] | None:
        with self.lock:  # one scrape counts, concurrent ones wait for it and share the answer
            if time.monotonic() - self.counted_at >= CACHE_S:
                self.counted = self._count()
                self.counted_at = time.monotonic()
            return self.counted

    def _count(self) -> dict[str, int] | None:
        try:
            with self.database.sessionmaker() as session:
                if session.get_bind().dialect.name == "postgresql":
                    session.execute(text(f"SET LOCAL statement_timeout = {STATEMENT_TIMEOUT_MS}"))
                return {
                    "detection": _scalar(
                        session.scalar(
                            select(func.count())
                            .select_from(Run)
                            .where(Run.detected_at.is_(None), Run.status == COMPLETED)
                        )
                    ),
                    "delivery": _scalar(
                        session.scalar(
                            select(func.count())
                            .select_from(Delivery)
                            .where(Delivery.state.in_(("pending", "sending")))
                        )
                    ),
                    "shard": _scalar(
                        session.scalar(
                            select(func.count())
                            .select_from(SuiteShard)
                            .where(SuiteShard.status.in_(("pending", "running")))
                        )
                    ),
                }
        except Exception:  # a scrape must answer; the log says why the gauge is missing
            log.exception("metrics: the waiting work could not be counted")
            return None


def _scalar(value: int | None) -> int:
    return int(value or 0)
