"""Suite runs triggered over the API: the row first (queued), then the machine's worker adopts it.

``POST /api/v1/suite-runs`` stores a queued suite run without shards (so that ``GET`` shows it
at once) and, after the commit, publishes ``bench.start_suite`` with its id on the machine's
queue. The worker's start task describes the machine, plans the shards and adopts the row
(``adopt_suite_run``): a redelivered start task finds it adopted and plans nothing again.

What one caller can queue is bounded: unfinished (queued or running) API suite runs per machine
and per token, so that a token cannot flood a GPU queue. A trigger's key is the caller's
idempotency key (or a fresh one), prefixed with the token's id: ``api-<token id>-<key>``.
"""

import uuid
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.core.db import utcnow
from app.core.errors import Conflict, DomainError
from app.suite_runs.models import SuiteRun, SuiteShard
from app.suite_runs.service import ShardPlan, SuiteRunNotFound

API_KEY_PREFIX = "api-"
QUEUED = "queued"
MAX_UNFINISHED_PER_MACHINE = 4  # queued or running API suite runs on one machine
MAX_UNFINISHED_PER_TOKEN = 16  # ... and of one token over all machines


class TooManyQueued(DomainError):
    """The bound on unfinished triggered suite runs is reached."""

    status_code = 429


class KeyReused(Conflict):
    """An idempotency key sent again with another request."""

    def __init__(self, key: str) -> None:
        super().__init__(f"the key {key!r} was used for another trigger (a retry sends the same)")


def trigger_key(token_id: int, key: str | None) -> str:
    """The suite run's key: the caller's idempotency key within its token, or a fresh one."""
    return f"{API_KEY_PREFIX}{token_id}-{key or uuid.uuid4().hex}"


def trigger_suite_run(
    session: Session, *, token_id: int, key: str | None, request: dict[str, Any]
) -> tuple[SuiteRun, bool]:
    """A queued suite run for ``request``, and whether it is new.

    ``request``: machine, tier, trigger, commit, channel, models. A retry under the same key
    returns the stored one; the same key with another request is a conflict.
    """
    full_key = trigger_key(token_id, key)
    if (existing := session.scalar(select(SuiteRun).where(SuiteRun.key == full_key))) is not None:
        if requested(existing) != request:
            raise KeyReused(key or "")
        return existing, False
    _check_bounds(session, token_id, request["machine"])
    suite_run = SuiteRun(
        key=full_key,
        machine=request["machine"],
        tier=request["tier"],
        trigger=request["trigger"],
        status=QUEUED,
        # RunIn's fields: the commit and channel reach the run; ``extra`` keeps the request.
        description={
            "commit": request["commit"],
            "environment": {"channel": request["channel"]},
            "extra": {"request": request},
        },
    )
    suite_run.shards = []
    session.add(suite_run)
    session.flush()
    return suite_run, True


def withdraw(session: Session, suite_run_id: int) -> None:
    """Remove a queued suite run whose worker could not be told (its key is free again)."""
    suite_run = session.get(SuiteRun, suite_run_id)
    if suite_run is not None and suite_run.status == QUEUED:
        session.delete(suite_run)
        session.flush()


def requested(suite_run: SuiteRun) -> dict[str, Any] | None:
    """What the trigger of an API suite run asked for (None for other suite runs)."""
    request = suite_run.description.get("extra", {}).get("request")
    return request if isinstance(request, dict) else None


def _check_bounds(session: Session, token_id: int, machine: str) -> None:
    unfinished = select(func.count()).where(
        SuiteRun.status.in_((QUEUED, "running")), SuiteRun.key.like(f"{API_KEY_PREFIX}%")
    )
    on_machine = session.scalar(unfinished.where(SuiteRun.machine == machine)) or 0
    if on_machine >= MAX_UNFINISHED_PER_MACHINE:
        raise TooManyQueued(
            f"{on_machine} triggered suite runs on {machine!r} are still queued or running "
            f"(at most {MAX_UNFINISHED_PER_MACHINE}): try again once one has finished"
        )
    mine = session.scalar(unfinished.where(SuiteRun.key.like(f"{API_KEY_PREFIX}{token_id}-%")))
    if (mine or 0) >= MAX_UNFINISHED_PER_TOKEN:
        raise TooManyQueued(
            f"this token's {mine} triggered suite runs are still queued or running "
            f"(at most {MAX_UNFINISHED_PER_TOKEN}): try again once one has finished"
        )


def adopt_suite_run(
    session: Session,
    suite_run_id: int,
    description: dict[str, Any],
    shards: list[ShardPlan],
) -> SuiteRun:
    """The worker's side: a queued suite run gets this machine's description and shards, and runs.

    Adopted already (a redelivered start task): returned as it is.
    A plan without shards (a models filter that names no case) fails it with the reason.
    """
    suite_run = session.get(SuiteRun, suite_run_id, with_for_update=True, populate_existing=True)
    if suite_run is None:
        raise SuiteRunNotFound(suite_run_id)
    if suite_run.status != QUEUED:
        return suite_run
    extra = {**suite_run.description.get("extra", {}), **description.get("extra", {})}
    suite_run.description = {**suite_run.description, **description, "extra": extra}
    suite_run.started_at = utcnow()
    suite_run.shards = [
        SuiteShard(position=i, label=p.label, cases=p.cases) for i, p in enumerate(shards)
    ]
    suite_run.status = "running"
    if not shards:
        models = (requested(suite_run) or {}).get("models")
        suite_run.status, suite_run.finished_at = "failed", utcnow()
        suite_run.reason = f"no case of the tier {suite_run.tier!r} matches the models {models}"
    session.flush()
    return suite_run
