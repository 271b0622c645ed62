"""The Celery application: broker and beat schedule from settings, no result backend.

Queues: ``default`` for the service's tasks (detection), ``bench.<machine>`` for one machine's
suite runs. Beat starts a suite run per configured machine on its cron (every 12 hours by
default) and looks for shards left behind by dead workers every few minutes.
"""

from typing import Any

from celery import Celery
from celery.schedules import crontab

from app.core.config import Schedule, Settings, settings
from app.core.queue import SWEEP_DETECTION

REQUEUE_EVERY_S = 300.0


def beat_schedule(config: Settings) -> dict[str, dict[str, Any]]:
    """Beat's entries: the detection sweep, a suite run per configured machine, the shard sweep."""
    entries: dict[str, dict[str, Any]] = {
        "sweep-detection": {
            "task": SWEEP_DETECTION,
            "schedule": config.DETECTION_SWEEP_S,
            "options": {"queue": "default"},
        }
    }
    entries |= {
        f"suite-{s.machine}-{s.tier}": {
            "task": "bench.start_suite",
            "schedule": cron(s),
            "kwargs": {"machine": s.machine, "tier": s.tier, "channel": s.channel},
            "options": {"queue": f"bench.{s.machine}"},
        }
        for s in config.SCHEDULES
    }
    # Every machine's unfinished shards, scheduled or triggered: the task only publishes, so
    # the service worker runs it, and each shard goes to its own machine's queue.
    entries["requeue-shards"] = {
        "task": "bench.requeue_shards",
        "schedule": REQUEUE_EVERY_S,
        "options": {"queue": "default"},
    }
    return entries


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
    include=["workers.tasks.anomalies", "workers.tasks.suite"],
)
celery_app.conf.update(
    task_default_queue="default",
    task_ignore_result=True,  # outcomes are database rows, not task results
    worker_prefetch_multiplier=1,
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
    # A task a dead worker held comes back after this long (Redis); longer than any shard.
    broker_transport_options={"visibility_timeout": settings.SHARD_TIMEOUT_S + 600},
    beat_schedule=beat_schedule(settings),
    timezone="UTC",
)
