"""The Celery task of every job ``app.jobs`` declares; the jobs themselves are tested in ``app``."""

from functools import cache
from typing import Any

from app.core.config import settings
from app.core.db import Database
from app.core.tasks import Task
from app.jobs import TASKS
from app.runtime import check_settings, connect
from workers.celery_app import declared


@cache
def worker_database() -> Database:
    """The worker process's database; tasks it queues go back to the broker."""
    database, _ = connect(settings)
    return database


def register(task: Task) -> None:
    """Register ``task`` with Celery: its job, run on this worker's database."""

    def run(**kwargs: Any) -> object:
        return task.bind(worker_database(), settings)(**kwargs)

    run.__doc__ = f"Task {task.name}: runs {task.job}."
    declared(task.name)(run)


check_settings(settings)  # a bad setting stops the worker at start, as it does the server
for task in TASKS:
    if task.job:
        register(task)
