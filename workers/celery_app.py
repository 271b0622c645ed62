"""The Celery application: broker and beat schedule from settings, no result backend.

Its tasks, their queues and options are those ``app.jobs`` declares: the service's tasks
(detection) on the default queue, one machine's suite runs on its own. Beat starts a suite run
per configured machine on its cron (every 12 hours by default) and sends each periodic task
``app.jobs`` declares on its interval (the sweeps, the daily upkeep, shards left behind by dead
workers), read from the same declarations as the in-process server's sweepers.

A worker's pool children, in multiprocess mode (``benchwatch worker --metrics-port``, or
``PROMETHEUS_MULTIPROC_DIR`` shared with the server), drop the metrics server they inherit
and have their live gauges forgotten when they exit (``app.core.metrics``).
"""

from collections.abc import Callable
from typing import Any

from celery import Celery
from celery import Task as CeleryTask
from celery.schedules import crontab
from celery.signals import worker_process_init, worker_process_shutdown

from app.benchmarks.vocabulary import SUITE_TIERS
from app.core import metrics
from app.core.config import Schedule, Settings, settings
from app.jobs import DEFAULT_QUEUE, START_SUITE, TASKS

TaskDecorator = Callable[[Callable[..., Any]], CeleryTask[Any, Any]]


def beat_schedule(config: Settings) -> dict[str, dict[str, Any]]:
    """Beat's entries: each periodic task on its interval, and each machine's suite runs.

    Raises:
        ValueError: a schedule names a tier the suite does not have, or a command suite
            that BENCHWATCH_COMMAND_SUITES does not define.
    """
    for s in config.SCHEDULES:
        if s.command is not None and s.command not in config.COMMAND_SUITES:
            known = ", ".join(config.COMMAND_SUITES) or "none defined"
            raise ValueError(
                f"BENCHWATCH_SCHEDULES: machine {s.machine!r} names command suite "
                f"{s.command!r}, not in BENCHWATCH_COMMAND_SUITES ({known})"
            )
        if s.command is None and s.tier not in SUITE_TIERS:
            raise ValueError(
                f"BENCHWATCH_SCHEDULES: machine {s.machine!r} has unknown tier {s.tier!r}; "
                f"one of {', '.join(SUITE_TIERS)}"
            )
    entries = {
        every.entry: entry(task.name, every.interval(config)) for task, every in TASKS.periodic()
    }
    entries |= {
        s.entry: entry(
            START_SUITE,
            cron(s),
            machine=s.machine,
            tier=s.suite_tier,
            channel=s.channel,
            **({"models": s.models} if s.models else {}),
        )
        for s in config.SCHEDULES
    }
    return entries


def entry(name: str, schedule: float | crontab, **kwargs: Any) -> dict[str, Any]:
    """Beat's entry for task ``name`` with ``kwargs``, sent to the queue they route it to."""
    found: dict[str, Any] = {"task": name, "schedule": schedule}
    found |= {"kwargs": kwargs} if kwargs else {}
    return found | {"options": {"queue": TASKS.queue_for(name, **kwargs)}}


def route(name: str, args: Any, kwargs: dict[str, Any] | None, *_: Any, **__: Any) -> Any:
    """Celery's router: a declared task goes to the queue its kwargs name in ``app.jobs``.

    A sender's own ``queue`` wins (a shard's kwargs do not name its machine).
    """
    return {"queue": TASKS.queue_for(name, **(kwargs or {}))} if name in TASKS else None


def cron(schedule: Schedule) -> crontab:
    """The crontab of a ``minute hour day-of-month month day-of-week`` string."""
    minute, hour, day_of_month, month_of_year, day_of_week = schedule.cron.split()
    return crontab(
        minute=minute,
        hour=hour,
        day_of_month=day_of_month,
        month_of_year=month_of_year,
        day_of_week=day_of_week,
    )


celery_app = Celery(
    "benchwatch",
    broker=settings.BROKER_URL or "memory://",
    include=["workers.tasks.jobs", "workers.tasks.suite", "workers.tasks.localize"],
)
celery_app.conf.update(
    task_default_queue=DEFAULT_QUEUE,
    task_routes=(route,),
    task_ignore_result=True,  # outcomes are database rows, not task results
    worker_prefetch_multiplier=1,
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
    # A task a dead worker held comes back after this long (Redis); longer than any shard.
    broker_transport_options={"visibility_timeout": settings.SHARD_TIMEOUT_S + 600},
    beat_schedule=beat_schedule(settings),
    timezone="UTC",
)


def declared(name: str, **implementation: Any) -> TaskDecorator:
    """Celery's decorator for task ``name``, with the options ``app.jobs`` declares for it.

    ``implementation`` says how the function is written (``bind=True``: it takes the task).
    """
    options: dict[str, Any] = {"name": name, **TASKS[name].options, **implementation}
    register: TaskDecorator = celery_app.task(**options)  # (its overloads cannot see options)
    return register


@worker_process_init.connect
def _child_started(**_: Any) -> None:
    metrics.close_inherited()  # the worker's main process answers scrapes, for all of them


@worker_process_shutdown.connect
def _child_exiting(pid: int, **_: Any) -> None:
    # A child killed outright never gets here; its counters stay summed, as they should, and
    # benchwatch keeps no live gauges for it to leave behind.
    metrics.process_exited(pid)
