"""Background work: tasks are queued on the session by name and published after its commit.

With ``BENCHWATCH_BROKER_URL`` set, tasks go to Celery (workers run them); without it they run
in this process on a small thread pool (the embedded default). Either way a task is published
only after the transaction that asked for it commits, so no task ever refers to a row that
was rolled back, and a rolled-back transaction publishes nothing.
"""

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from sqlalchemy import event
from sqlalchemy.orm import Session

log = logging.getLogger(__name__)

PUBLISH_TIMEOUT_S = 2.0  # an upload waits at most about this long for a broker that is down
PENDING = "benchwatch.pending_tasks"
PUBLISHER = "benchwatch.publisher"


class Publisher(Protocol):
    """Sends a named task with keyword arguments somewhere it will run."""

    def publish(self, name: str, kwargs: dict[str, Any]) -> None:
        """Send one task."""


def enqueue_after_commit(session: Session, name: str, **kwargs: Any) -> None:
    """Ask for task ``name`` to run once the session's transaction has committed."""
    session.info.setdefault(PENDING, []).append((name, kwargs))


def commit(session: Session) -> None:
    """Commit, then publish the tasks queued in this transaction."""
    session.commit()
    pending = session.info.pop(PENDING, [])
    publisher: Publisher | None = session.info.get(PUBLISHER)
    for name, kwargs in pending:
        if publisher is None:
            log.warning("no publisher: task %s%s dropped", name, kwargs)
            continue
        try:
            publisher.publish(name, kwargs)
        except Exception:  # the data is committed; a rescan catches up on the lost task
            log.exception("could not publish task %s%s", name, kwargs)


@event.listens_for(Session, "after_soft_rollback")
def _forget_pending(session: Session, previous_transaction: Any) -> None:
    # A savepoint's rollback (begin_nested) fires this too: the transaction around it goes on,
    # and what it queued before the savepoint is still to be published when it commits.
    if not previous_transaction.nested:
        session.info.pop(PENDING, None)


class CeleryPublisher:
    """Publishes to the broker by task name: the API never imports the workers' code."""

    def __init__(self, broker_url: str, route: Callable[..., str]) -> None:
        """``route(name, **kwargs)`` names the queue of a task (``Registry.queue_for``)."""
        from celery import Celery  # only where a broker is configured

        self.route = route
        self.client = Celery("benchwatch-publisher", broker=broker_url)
        self.client.conf.update(
            broker_connection_retry_on_startup=True,
            broker_connection_timeout=PUBLISH_TIMEOUT_S,
            # Redis: a refused or silent broker fails the publish instead of holding the request
            broker_transport_options={
                "socket_connect_timeout": PUBLISH_TIMEOUT_S,
                "socket_timeout": PUBLISH_TIMEOUT_S,
            },
        )

    def publish(self, name: str, kwargs: dict[str, Any]) -> None:
        """Send the task to its queue; raises when the broker stays unreachable.

        One quick retry rides over a dropped connection; beyond that the caller logs the loss
        and the detection sweep queues the run again once the broker is back.
        """
        self.client.send_task(
            name,
            kwargs=kwargs,
            queue=self.route(name, **kwargs),
            retry=True,
            retry_policy={"max_retries": 1, "interval_start": 0.1, "interval_step": 0.2},
        )


class InProcessPublisher:
    """Runs tasks in this process: one background thread per queue (a lane), in order on each.

    ``lane_of(name)`` names a task's lane (its queue), so that slow work on one queue (a
    receiver that takes its whole timeout to answer) does not hold up another's (detection).
    """

    def __init__(
        self,
        jobs: dict[str, Callable[..., object]],
        lane_of: Callable[[str], str] = lambda _: "default",
    ) -> None:
        self.jobs = jobs
        self.lane_of = lane_of
        self.lanes: dict[str, ThreadPoolExecutor] = {}
        self.lock = threading.Lock()

    def _lane(self, name: str) -> ThreadPoolExecutor:
        lane = self.lane_of(name)
        with self.lock:
            if lane not in self.lanes:
                self.lanes[lane] = ThreadPoolExecutor(
                    max_workers=1, thread_name_prefix=f"benchwatch-job-{lane}"
                )
            return self.lanes[lane]

    def publish(self, name: str, kwargs: dict[str, Any]) -> None:
        """Schedule the job on its lane; errors are logged, never raised into the request."""
        self._lane(name).submit(self._run, name, kwargs)

    def _run(self, name: str, kwargs: dict[str, Any]) -> None:
        job = self.jobs.get(name)
        if job is None:
            log.error("no in-process job named %s", name)
            return
        try:
            job(**kwargs)
        except Exception:
            log.exception("in-process job %s%s failed", name, kwargs)

    def drain(self) -> None:
        """Wait for what every lane has scheduled so far (tests, and a clean shutdown)."""
        with self.lock:
            lanes = list(self.lanes.values())
        for lane in lanes:
            lane.submit(lambda: None).result()

    def close(self) -> None:
        """Finish what is queued, then stop the threads."""
        with self.lock:
            lanes = list(self.lanes.values())
        for lane in lanes:
            lane.shutdown(wait=True)
