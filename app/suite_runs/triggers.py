"""Suite runs triggered over the API: the row first (queued), then the machine's worker adopts it.

``POST /api/v1/suite-runs`` stores a queued suite run without shards (so that ``GET`` shows it
at once) and, after the commit, publishes ``bench.start_suite`` with its id on the machine's
queue. The worker's start task describes the machine, plans the shards and adopts the row
(``adopt_suite_run``): a redelivered start task finds it adopted and plans nothing again.

What one caller can queue is bounded: unfinished (queued or running) API suite runs per machine
and per token, so that a token cannot flood a GPU queue. A trigger's key is the caller's
idempotency key (or a fresh one), prefixed with the token's id: ``api-<token id>-<key>``.
The bounds are checked and the row inserted in one turn (``_take_turn``), so that triggers sent
at once cannot all count the same few and pass together. A trigger no worker adopts within
``BENCHWATCH_TRIGGER_EXPIRE_S`` (a machine without a worker) is marked ``expired`` and stops
counting; so is the queue of a machine nobody serves.

A project-limited token's trigger is stored under its project: the run the suite makes lands
there (``project`` of the request; another project is a 403 at ``body.project``).
"""

import uuid
from datetime import timedelta
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from app.core.db import utcnow
from app.core.errors import Conflict, DomainError
from app.core.names import DEFAULT_PROJECT
from app.suite_runs.models import SuiteRun, SuiteShard
from app.suite_runs.service import ShardPlan, SuiteRunNotFound

API_KEY_PREFIX = "api-"
QUEUED = "queued"
EXPIRED = "expired"  # queued, and no worker adopted it in time
TRIGGER_LOCK = 0x62770003  # the advisory lock class of triggers ("bw", 3)
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
    session: Session,
    *,
    token_id: int,
    key: str | None,
    request: dict[str, Any],
    expire_after: timedelta = timedelta(hours=6),
) -> tuple[SuiteRun, bool]:
    """A queued suite run for ``request``, and whether it is new.

    ``request``: machine, tier, trigger, commit, channel, models and, for a project other than
    the default, project. A retry under the same key returns the stored one; the same key with
    another request is a conflict. Queued triggers older than ``expire_after`` expire first.
    """
    _take_turn(session, expire_after)
    full_key = trigger_key(token_id, key)
    if (existing := session.scalar(select(SuiteRun).where(SuiteRun.key == full_key))) is not None:
        if requested(existing) != request:
            raise KeyReused(key or "")
        return existing, False
    _check_bounds(session, token_id, request["machine"])
    project = request.get("project", DEFAULT_PROJECT)
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
            **({"project": project} if project != DEFAULT_PROJECT else {}),
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


def _take_turn(session: Session, expire_after: timedelta) -> None:
    """Triggers take turns until the transaction ends; stale queued ones expire first.

    On Postgres a transaction-level advisory lock; on SQLite the expiring ``UPDATE`` is the
    transaction's first write, which takes the database's one write lock (a busy trigger
    waits for it, ``busy_timeout``) before anything is counted. Either way the next trigger
    counts what this one inserted.
    """
    if session.get_bind().dialect.name == "postgresql":
        session.execute(select(func.pg_advisory_xact_lock(TRIGGER_LOCK, 0)))
    now = utcnow()
    reason = (
        f"no worker adopted it within {expire_after.total_seconds():g} s "
        "(BENCHWATCH_TRIGGER_EXPIRE_S): is `benchwatch worker --machine` running there?"
    )
    session.execute(
        update(SuiteRun)
        .where(
            SuiteRun.status == QUEUED,
            SuiteRun.key.like(f"{API_KEY_PREFIX}%"),
            SuiteRun.started_at < now - expire_after,
        )
        .values(status=EXPIRED, finished_at=now, reason=reason)
        .execution_options(synchronize_session=False)
    )


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
