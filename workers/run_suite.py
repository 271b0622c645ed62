"""Run a tier here, without Celery (``benchwatch run-suite``), and store or post the run.

It measures as a shard's child process does (``workers.measurements``).
"""

import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from app.core.config import Settings
from app.core.migrate import is_up_to_date
from app.runs.ingest import ingest_run
from app.runs.schemas import RunIn
from app.runtime import connect, disconnect
from app.suite_runs.rows import payload_rows
from workers.environment import describe_environment, describe_machine


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
            **payload_rows(rows),
        }
    )


def store(run_in: RunIn, settings: Settings) -> int:
    """Ingest into the configured database; detection follows (here, or on a worker).

    Raises:
        RuntimeError: the database is not migrated.
    """
    database, publisher = connect(settings)
    if not is_up_to_date(database.engine):
        disconnect(database, publisher)
        raise RuntimeError(f"{database.engine.url!r} is not migrated: run `benchwatch migrate`")
    with database.session_scope() as session:
        run_id = ingest_run(session, run_in, source="run-suite").run.id
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


def save(run_in: RunIn) -> Path:
    """The run as native JSON in a file of its own (in the temporary directory), for upload."""
    handle, name = tempfile.mkstemp(prefix="benchwatch-run-", suffix=".json")
    with os.fdopen(handle, "w") as file:
        file.write(run_in.model_dump_json(exclude_none=True))
    return Path(name)


def now() -> datetime:
    """The run's start time."""
    return datetime.now(UTC).replace(microsecond=0)
