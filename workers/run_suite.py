"""Run a tier of the built-in suite here, without Celery, and store or post the run."""

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
import torch

from app.core.config import Settings
from app.jobs import connect, disconnect
from app.runs import service as runs_service
from app.runs.schemas import RunIn
from workers.environment import describe_environment, describe_machine
from workers.harness import Case, Plan, measure
from workers.suites.models import MODELS
from workers.suites.operators import OPERATORS

CONFIGS = ("eager", "default", "dynamic", "cudagraphs", "max_autotune")
PRECISIONS = ("fp32", "bf16", "amp", "int8")


@dataclass(frozen=True)
class Group:
    """Cases measured under every one of these configs and precisions."""

    cases: tuple[Case, ...]
    configs: tuple[str, ...]
    precisions: tuple[str, ...]


@dataclass(frozen=True)
class Tier:
    """What a tier runs and how often it repeats each timing."""

    groups: tuple[Group, ...]
    plan: Plan


TIERS = {
    "smoke": Tier(
        (Group(OPERATORS, CONFIGS, PRECISIONS), Group(MODELS, CONFIGS, PRECISIONS)),
        Plan(repeats=10, warmup=2),
    ),
    "daily": Tier(
        (Group(OPERATORS, CONFIGS, PRECISIONS), Group(MODELS, CONFIGS, PRECISIONS)),
        Plan(repeats=50, warmup=5),
    ),
}

Progress = Callable[[int, int, str], None]


def run_tier(
    tier: Tier,
    device: torch.device,
    *,
    only: str | None = None,
    configs: Iterable[str] | None = None,
    precisions: Iterable[str] | None = None,
    progress: Progress | None = None,
) -> list[dict[str, Any]]:
    """Every case x config x precision of a tier (filtered), as result rows."""
    plan = [
        (case, config, precision)
        for group in tier.groups
        for case in group.cases
        if only is None or only in case.model
        for config in (tuple(configs) if configs else group.configs)
        for precision in (tuple(precisions) if precisions else group.precisions)
    ]
    rows: list[dict[str, Any]] = []
    for done, (case, config, precision) in enumerate(plan, start=1):
        if progress is not None:
            progress(done, len(plan), f"{case.model} {config} {precision}")
        rows += measure(case, config, precision, device, tier.plan)
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


def print_progress(done: int, total: int, label: str) -> None:
    """A one-line progress bar on stderr."""
    width = 30
    filled = width * done // total
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {label:<40}")
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def now() -> datetime:
    """The run's start time."""
    return datetime.now(UTC).replace(microsecond=0)
