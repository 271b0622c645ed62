"""A background task declared once: its name, its queue, how Celery delivers it, its job.

A :class:`Registry` of them is the single source of every task's name and queue: Celery's
tasks are registered from it, the in-process runner's job table is built from it, and
publishers ask it where a task goes. What the tasks are is the app's business (``app.jobs``);
this module knows none of them.
"""

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from importlib import import_module
from typing import Any

from app.core.config import Settings
from app.core.db import Database

Queue = str | Callable[..., str]  # a queue, or a function of a call's kwargs naming one


@dataclass(frozen=True)
class Every:
    """How often a periodic task runs, read by beat and by the in-process sweeper alike.

    Attributes:
        entry: beat's name for it (beat's schedule file keeps each entry's last run by name).
        interval: its seconds, from the settings (0 or less: the in-process server never runs
            it; beat runs what it is given).
        first_after_s: in process, the wait before its first run (beat keeps its own state).
    """

    entry: str
    interval: Callable[[Settings], float]
    first_after_s: float = 0.0


def no_config(_: Settings) -> Mapping[str, Any]:
    """A job that takes no settings."""
    return {}


@dataclass(frozen=True)
class Task:
    """One background task.

    Attributes:
        name: its name on the wire (brokers and running workers know it by this name).
        queue: where it goes; a function is called with the call's kwargs (and any routing
            value the sender adds, such as ``machine``).
        job: ``"module:function"``, run as ``function(database, **config(settings),
            **kwargs)`` in this process or by a service worker; named by path so that the
            registry imports no domain module. None: a worker-only task that ``workers/``
            implements (it needs torch or a benchmark machine).
        config: the settings its job takes, as keyword arguments.
        options: Celery's task options (acks_late, retries, time limits...).
        every: a periodic task's interval; None: it runs when sent.
    """

    name: str
    queue: Queue
    job: str | None = None
    config: Callable[[Settings], Mapping[str, Any]] = no_config
    options: Mapping[str, Any] = field(default_factory=dict)
    every: Every | None = None

    def queue_for(self, **route: Any) -> str:
        """The queue of one call, given its kwargs (and routing values)."""
        return self.queue if isinstance(self.queue, str) else self.queue(**route)

    def bind(self, database: Database, settings: Settings) -> Callable[..., object]:
        """The job, ready to be called with the task's kwargs."""
        if self.job is None:
            raise LookupError(f"task {self.name} runs on a benchmark worker only")
        module, _, function = self.job.partition(":")
        return partial(getattr(import_module(module), function), database, **self.config(settings))


class Registry:
    """Every task of an application by name; each name is declared once."""

    def __init__(self) -> None:
        self.tasks: dict[str, Task] = {}

    def add(
        self,
        name: str,
        queue: Queue,
        *,
        job: str | None = None,
        config: Callable[[Settings], Mapping[str, Any]] = no_config,
        every: Every | None = None,
        **options: Any,
    ) -> str:
        """Declare a task (see :class:`Task`); gives back its name, for senders to import."""
        if name in self.tasks:
            raise ValueError(f"task {name} is declared twice")
        self.tasks[name] = Task(name, queue, job, config, options, every)
        return name

    def __getitem__(self, name: str) -> Task:
        return self.tasks[name]

    def __contains__(self, name: object) -> bool:
        return name in self.tasks

    def __iter__(self) -> Iterator[Task]:
        return iter(self.tasks.values())

    def periodic(self) -> list[tuple[Task, Every]]:
        """The periodic tasks, each with its interval."""
        return [(task, task.every) for task in self if task.every is not None]

    def queue_for(self, name: str, **route: Any) -> str:
        """The queue of one call of task ``name``; raises KeyError for an undeclared task."""
        return self.tasks[name].queue_for(**route)

    def jobs(self, database: Database, settings: Settings) -> dict[str, Callable[..., object]]:
        """The in-process runner's table: each task that has a job, bound to a database."""
        return {task.name: task.bind(database, settings) for task in self if task.job}
