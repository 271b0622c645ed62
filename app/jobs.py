"""Every background task of benchwatch, declared once, and where they run.

A task is one ``TASKS.add`` line: its name on the wire, its queue, its Celery options, the
job that does it and, for a periodic one, how often (``every``). Celery's tasks (``workers/``),
the in-process runner and sweeper, the publishers and beat all read them from here. Adding one
is writing its job and adding its line.

Jobs are named by path and run when a task is, so this module imports no domain module and
any service can import the task names it sends (``tests/test_architecture.py`` holds it to
that, strings included). What a process starts with is ``app.runtime``'s. The names are those
running workers and brokers already know.
"""

import logging
import threading
from typing import Any

from sqlalchemy.exc import IntegrityError, OperationalError

from app.core import queue
from app.core.tasks import Every, Registry

log = logging.getLogger(__name__)
DEFAULT_QUEUE = "default"  # the service's tasks, consumed by ``benchwatch worker``
# Deliveries wait on receivers (up to their timeout each): a queue of their own, so that a
# slow receiver never holds up detection (``benchwatch worker`` consumes both).
NOTIFY_QUEUE = "notify"
SERVICE_QUEUES = (DEFAULT_QUEUE, NOTIFY_QUEUE)


def bench_queue(machine: str) -> str:
    """The queue of a machine's benchmark worker (``benchwatch worker --machine``)."""
    return f"bench.{machine}"


def machine_queue(*, machine: str | None = None, **_: Any) -> str:
    """A task about one machine runs on its benchmark worker; one about all of them, here."""
    return bench_queue(machine) if machine else DEFAULT_QUEUE


TASKS = Registry()
DETECT_RUN = TASKS.add(
    "anomalies.detect_run",
    DEFAULT_QUEUE,
    job="app.anomalies.jobs:detect_run",
    config=lambda settings: {"thresholds": settings.DETECTOR_THRESHOLDS},
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
SWEEP_DETECTION = TASKS.add(
    "anomalies.sweep_detection",
    DEFAULT_QUEUE,
    job="app.anomalies.jobs:sweep_detection",
    every=Every("sweep-detection", lambda settings: settings.DETECTION_SWEEP_S),
    config=lambda settings: {
        "overdue_s": settings.DETECTION_OVERDUE_S,
        "shards_quiet_s": settings.RUN_SHARDS_QUIET_S,
    },
)
SWEEP_SILENCE = TASKS.add(  # machines that stopped reporting
    "anomalies.sweep_silence",
    DEFAULT_QUEUE,
    job="app.anomalies.jobs:sweep_silence",
    every=Every("sweep-silence", lambda settings: settings.SILENCE_SWEEP_S),
    config=lambda settings: {"schedules": settings.SCHEDULES},  # when machines are due
    autoretry_for=(OperationalError, IntegrityError),
    retry_backoff=True,
    max_retries=5,
)
# Notices: the sweep plans reminders, sends what is due and queues deliveries (idempotent);
# a delivery claims its row before it sends, so a duplicate message sends nothing.
DISPATCH_NOTICES = TASKS.add(
    "notifications.dispatch",
    DEFAULT_QUEUE,
    job="app.notifications.jobs:dispatch",
    every=Every("dispatch-notices", lambda settings: settings.NOTIFY_SWEEP_S),
    config=lambda settings: {"settings": settings},
    acks_late=True,
    autoretry_for=(OperationalError, IntegrityError),
    retry_backoff=True,
    max_retries=5,
)
# Two-way bug status where no webhook reaches the server: linked GitHub issues read again.
POLL_ISSUES = TASKS.add(
    "notifications.poll_issues",
    DEFAULT_QUEUE,
    job="app.notifications.jobs:poll_issues",
    every=Every("poll-issues", lambda settings: settings.GITHUB_POLL_S),
    config=lambda settings: {"settings": settings},
)
DELIVER = TASKS.add(
    "notifications.deliver",
    NOTIFY_QUEUE,
    job="app.notifications.jobs:deliver",
    config=lambda settings: {"settings": settings},
    # A worker lost mid-send leaves the delivery leased; the sweep queues it again when the
    # lease ends (the receiver sees the same webhook-id).
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=300,
)
# The runs' daily upkeep (the in-process server's first an hour after it starts: it moves rows
# between partitions, which a server that just started has no need to do at once): Postgres
# partitions of the months ahead, and retention (0 days: keep forever).
UPKEEP_EVERY_S = 86400.0
UPKEEP_FIRST_AFTER_S = 3600.0
KEEP_UP_PARTITIONS = TASKS.add(
    "runs.keep_up_partitions",
    DEFAULT_QUEUE,
    job="app.runs.jobs:keep_up_partitions",
    every=Every("keep-up-partitions", lambda _: UPKEEP_EVERY_S, UPKEEP_FIRST_AFTER_S),
    config=lambda settings: {
        "per_pass": settings.PARTITIONS_PER_PASS,
        "months_back": settings.PARTITION_MONTHS_BACK,
    },
    autoretry_for=(OperationalError,),  # a lock not granted in time: later
    retry_backoff=600,
    max_retries=5,
)
APPLY_RETENTION = TASKS.add(
    "runs.apply_retention",
    DEFAULT_QUEUE,
    job="app.corrections.jobs:apply_retention",
    every=Every("apply-retention", lambda _: UPKEEP_EVERY_S, UPKEEP_FIRST_AFTER_S),
    config=lambda settings: {
        "samples_days": settings.RETAIN_SAMPLES_DAYS,
        "branch_runs_days": settings.RETAIN_BRANCH_RUNS_DAYS,
    },
    soft_time_limit=3600,
)
# Worker-only (workers/tasks/suite.py): they need torch and the machine they measure.
START_SUITE = TASKS.add("bench.start_suite", machine_queue, acks_late=True)
RUN_SHARD = TASKS.add(  # routed by the machine its sender names (its kwargs hold the shard)
    "bench.run_shard", machine_queue, acks_late=True, reject_on_worker_lost=True, max_retries=None
)
# A localization, on its finding's machine (workers/tasks/localize.py): its kwargs name the
# machine. Acknowledged when done; a message lost or a worker dead is found by the sweep below.
LOCALIZE = TASKS.add("bench.localize", machine_queue, acks_late=True, reject_on_worker_lost=True)
# Without a machine, every machine's unfinished shards (scheduled or triggered runs'), and its
# localizations waiting for a worker: it only publishes, so the service worker runs it, and
# each shard or localization goes to its own machine's queue.
REQUEUE_EVERY_S = 300.0
REQUEUE_SHARDS = TASKS.add(
    "bench.requeue_shards",
    machine_queue,
    every=Every("requeue-shards", lambda _: REQUEUE_EVERY_S),
)


class Sweeper:
    """In process, what beat does with a broker: a sweep task, now and every interval.

    A server killed with detections queued in its memory loses them; the sweep at the next
    start queues them again (and the notice sweep sends what fell due meanwhile). A task with
    ``first_after_s`` waits that long before its first run.
    """

    def __init__(
        self, publisher: queue.Publisher, task: str, every_s: float, first_after_s: float = 0.0
    ) -> None:
        self.publisher = publisher
        self.task = task
        self.every_s = every_s
        self.first_after_s = first_after_s
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._loop, name=f"sweep-{task}", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        if self.stopped.wait(self.first_after_s):
            return
        while True:
            try:
                self.publisher.publish(self.task, {})
            except Exception:  # the publisher is closing: the next server's sweep catches up
                log.exception("could not queue the sweep %s", self.task)
            if self.stopped.wait(self.every_s):
                return

    def stop(self) -> None:
        """No more sweeps (the one queued last still runs)."""
        self.stopped.set()
        self.thread.join()
