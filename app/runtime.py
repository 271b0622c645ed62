"""What starts with a benchwatch process, the server's and the worker's alike.

The start-up checks (one function, so the server and the worker refuse the same settings), the
session listeners installed by a call, the database with its publisher, and, in a process
without a broker, the sweepers of the periodic tasks ``app.jobs`` declares (beat runs them with
one). This module sits above the domains, which know nothing of it; ``app.main`` and
``workers/`` call it.
"""

from app.anomalies.registry import read_thresholds
from app.benchmarks import known_ids
from app.core import queue
from app.core.config import Settings
from app.core.db import Database
from app.jobs import TASKS, Sweeper
from app.localization import auto as auto_localize
from app.notifications import planning
from app.notifications.guard import AllowList
from app.uploads.formats import AUTO, BY_NAME


def check_settings(config: Settings) -> None:
    """Refuse, before anything starts, a setting a domain reads too late to refuse in time.

    Raises:
        ValueError: the detector thresholds name a key or field no detector knows, the
            receiver allow-list holds a bad entry, or a command suite names a format no
            upload parser reads.
    """
    read_thresholds(config.DETECTOR_THRESHOLDS)
    AllowList.parse(config.RECEIVER_ALLOW)
    readable = (AUTO, *BY_NAME)
    for name, suite in config.COMMAND_SUITES.items():
        if suite.format not in readable:
            raise ValueError(
                f"BENCHWATCH_COMMAND_SUITES[{name!r}].format {suite.format!r}: "
                f"one of {', '.join(readable)}"
            )


def install_listeners() -> None:
    """Install the session listeners the domains' writes rely on.

    Notices are planned in the transaction that changes an alert group, by a listener of the
    notice planner: a process that wrote findings without it would tell nobody. The catalog's
    generation token changes as a transaction that created benchmarks commits, so that other
    processes' remembered ids are dropped. Idempotent.
    """
    known_ids.install()
    planning.install()


def connect(settings: Settings) -> tuple[Database, queue.Publisher]:
    """The database, with its listeners, and where its sessions publish tasks.

    Celery when a broker is configured, else a runner in this process. Localizations start
    by themselves as the settings say (``BENCHWATCH_LOCALIZE``), in this process's sessions.
    """
    install_listeners()
    auto_localize.install(
        auto_localize.Policy(
            settings.LOCALIZE, settings.LOCALIZE_BUDGET, dict(settings.LOCALIZE_SUITES)
        )
    )
    database = Database(settings.DATABASE_URL)
    publisher: queue.Publisher
    if settings.BROKER_URL:
        publisher = queue.CeleryPublisher(settings.BROKER_URL, TASKS.queue_for)
    else:
        lane_of = TASKS.queue_for  # each queue a thread: deliveries beside detection
        publisher = queue.InProcessPublisher(TASKS.jobs(database, settings), lane_of)
    database.set_publisher(publisher)
    return database, publisher


def start_sweepers(config: Settings, publisher: queue.Publisher) -> list[Sweeper]:
    """In process, the periodic tasks this process can run, each on its interval.

    With a broker, beat sends them (``workers.celery_app.beat_schedule``, from the same
    declarations) and this process starts none; a worker-only task (no job) is beat's alone.
    """
    if not isinstance(publisher, queue.InProcessPublisher):
        return []
    sweepers = []
    for task, every in TASKS.periodic():
        interval = every.interval(config)
        if task.job is not None and interval > 0:
            sweepers.append(Sweeper(publisher, task.name, interval, every.first_after_s))
    return sweepers


def disconnect(database: Database, publisher: queue.Publisher) -> None:
    """Let in-process jobs finish, then close the database's connections."""
    if isinstance(publisher, queue.InProcessPublisher):
        publisher.close()
    database.dispose()
