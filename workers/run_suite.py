"""Run a tier of the built-in suite here, without Celery, and store or post the run."""

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple

import httpx
import torch

from app.core.config import Settings
from app.jobs import connect, disconnect
from app.runs import service as runs_service
from app.runs.schemas import RunIn
from workers.environment import describe_environment, describe_machine
from workers.harness import Case, Mode, Plan, measure, scaled
from workers.suites.models import MODELS
from workers.suites.operators import COLLECTIVES, OPERATORS

CONFIGS = ("eager", "default", "dynamic", "cudagraphs", "max_autotune")
PRECISIONS = ("fp32", "bf16", "amp", "int8")
DAILY_PRECISIONS = (*PRECISIONS, "int4")
FULL_PRECISIONS = (*DAILY_PRECISIONS, "fp16")
TRAINING_PRECISIONS = ("fp32", "amp", "bf16")


@dataclass(frozen=True)
class Group:
    """Cases measured under every one of these configs, precisions and modes."""

    cases: tuple[Case, ...]
    configs: tuple[str, ...]
    precisions: tuple[str, ...]
    modes: tuple[Mode, ...] = ("inference",)


@dataclass(frozen=True)
class Tier:
    """What a tier runs and how often it repeats each timing."""

    groups: tuple[Group, ...]
    plan: Plan


class Task(NamedTuple):
    """One measurement: a case under a config, a precision and a mode."""

    case: Case
    config: str
    precision: str
    mode: Mode


def _named(cases: tuple[Case, ...], *names: str) -> tuple[Case, ...]:
    return tuple(case for case in cases if case.model in names)


TRAINABLE = tuple(case for case in MODELS if case.training_reason is None)
# Larger tiers run the models at 8 times their smoke batch.
MODELS_X8 = tuple(scaled(case, 8) for case in MODELS)
TRAINABLE_X8 = tuple(scaled(case, 8) for case in TRAINABLE)
TIERS = {
    # Every category once, eager fp32, one training step and a config that is skipped on a
    # CPU: the integration tests' tier.
    "test": Tier(
        (
            Group(OPERATORS + COLLECTIVES + MODELS, ("eager",), ("fp32",)),
            Group(_named(OPERATORS, "softmax"), ("cudagraphs",), ("fp32",)),
            Group(_named(MODELS, "resnet"), ("eager",), ("fp32",), ("training",)),
        ),
        Plan(repeats=3, warmup=1),
    ),
    # Operators and tiny shapes of every category under every config and precision, plus
    # AMP training of a CNN and a transformer: within 10 minutes on a 2-core CPU.
    "smoke": Tier(
        (
            Group(OPERATORS, CONFIGS, PRECISIONS),
            Group(COLLECTIVES, ("eager",), ("fp32",)),
            Group(MODELS, CONFIGS, PRECISIONS),
            Group(
                _named(MODELS, "resnet", "bert"),
                ("eager", "default"),
                ("fp32", "amp"),
                ("training",),
            ),
        ),
        Plan(repeats=10, warmup=2, max_repeats=30),
    ),
    "daily": Tier(
        (
            Group(OPERATORS, CONFIGS, DAILY_PRECISIONS),
            Group(COLLECTIVES, ("eager",), ("fp32",)),
            Group(MODELS_X8, CONFIGS, DAILY_PRECISIONS),
            Group(TRAINABLE_X8, ("eager", "default", "cudagraphs"), ("fp32", "amp"), ("training",)),
        ),
        Plan(repeats=50, warmup=5, max_repeats=150),
    ),
    "full": Tier(
        (
            Group(OPERATORS, CONFIGS, FULL_PRECISIONS),
            Group(COLLECTIVES, ("eager",), ("fp32",)),
            Group(MODELS_X8, CONFIGS, FULL_PRECISIONS),
            Group(TRAINABLE_X8, CONFIGS, TRAINING_PRECISIONS, ("training",)),
        ),
        Plan(repeats=100, warmup=10, max_repeats=300),
    ),
}

Progress = Callable[[int, int, str], None]


def tier_tasks(
    tier: Tier,
    *,
    only: str | None = None,
    configs: Iterable[str] | None = None,
    precisions: Iterable[str] | None = None,
) -> list[Task]:
    """Every case x config x precision x mode of a tier, filtered."""
    return [
        Task(case, config, precision, mode)
        for group in tier.groups
        for case in group.cases
        if only is None or only in case.model
        for mode in group.modes
        for config in (tuple(configs) if configs else group.configs)
        for precision in (tuple(precisions) if precisions else group.precisions)
    ]


def run_tasks(
    tasks: list[Task], device: torch.device, plan: Plan, progress: Progress | None = None
) -> list[dict[str, Any]]:
    """Measure the tasks in order, as result rows."""
    rows: list[dict[str, Any]] = []
    for done, task in enumerate(tasks, start=1):
        if progress is not None:
            label = f"{task.case.model} {task.config} {task.precision} {task.mode}"
            progress(done, len(tasks), label)
        rows += measure(task.case, task.config, task.precision, device, plan, task.mode)
    return rows


def build_run(
    rows: list[dict[str, Any]],
    *,
    tier: str,
    machine: str | None,
    channel: str,
    key: str | None,
    started_at: datetime,
) -> RunIn:
    """The native payload of one suite run on this host."""
    described = describe_machine(machine)
    return RunIn.model_validate(
        {
            "key": key or f"suite-{described.name}-{tier}-{started_at:%Y%m%dT%H%M%S}",
            "machine": described.model_dump(),
            "environment": describe_environment(channel).model_dump(),
            "trigger": "manual",
            "tier": tier,
            "started_at": started_at.isoformat(),
            "finished_at": datetime.now(UTC).isoformat(),
            "results": rows,
        }
    )


def store(run_in: RunIn, settings: Settings) -> int:
    """Ingest into the configured database; detection follows (here, or on a worker)."""
    database, publisher = connect(settings)
    with database.session_scope() as session:
        run_id = runs_service.ingest_run(session, run_in, source="run-suite").run.id
    disconnect(database, publisher)  # detection in this process finishes first
    return run_id


def post(run_in: RunIn, server: str, token: str) -> int:
    """POST the run to a benchwatch server; a retry of the same key is harmless."""
    response = httpx.post(
        f"{server.rstrip('/')}/api/v1/runs",
        content=run_in.model_dump_json(exclude_none=True),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        timeout=300,
    )
    response.raise_for_status()
    run_id: int = response.json()["id"]
    return run_id


def now() -> datetime:
    """The run's start time."""
    return datetime.now(UTC).replace(microsecond=0)
