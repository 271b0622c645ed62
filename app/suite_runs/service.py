"""Suite runs: open one with its shards, lease shards to workers, close the run when all are in.

A shard is held by one worker at a time through a lease the worker renews while the shard
runs. A worker that dies stops renewing; once the lease has lapsed, the shard can be claimed
again (by another worker, or by the same one after a restart), so it is neither lost nor run
twice at once. Each claim is one conditional UPDATE (it holds on SQLite, which has no row
locks) and names the attempt with a fresh lease id: only that attempt may renew the lease or
record the outcome, so a worker restarted under the same host name cannot finish its previous
attempt's shard. The run is ingested once, through the ingestion service the API uses, when the
last shard is done or has failed for good; a run that cannot be ingested fails the suite run
with the reason.
"""

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from prometheus_client import Counter
from pydantic import TypeAdapter, ValidationError
from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session, selectinload

from app.core.db import utcnow
from app.core.errors import DomainError, NotFound
from app.core.metrics import after_commit
from app.core.pagination import count_and_page
from app.runs.ingest import ingest_run
from app.runs.models import Run
from app.runs.schemas import ResultIn, RunIn
from app.suite_runs import pools
from app.suite_runs.models import (
    COMPARE_TRIGGER,
    LOCALIZE_TRIGGER,
    RERUN_TRIGGER,
    SuiteRun,
    SuiteShard,
)
from app.suite_runs.rows import failed_rows, payload_rows

ROWS = TypeAdapter(list[ResultIn])
UNFINISHED = ("pending", "running")
log = logging.getLogger(__name__)
SHARDS = Counter(
    "benchwatch_shards",
    "Suite shard attempts by outcome: done, failed (for good), released (to run again)",
    ["outcome"],
)


@dataclass(frozen=True)
class ShardPlan:
    """A shard as the planner made it: a label and the result identities it measures."""

    label: str
    cases: list[dict[str, Any]]


def open_suite_run(
    session: Session,
    *,
    key: str,
    machine: str,
    tier: str,
    trigger: str,
    description: dict[str, Any],
    shards: list[ShardPlan],
) -> SuiteRun:
    """The suite run of this key, created with its pending shards on first sight."""
    existing = session.scalar(select(SuiteRun).where(SuiteRun.key == key))
    if existing is not None:
        return existing
    suite_run = SuiteRun(
        key=key, machine=machine, tier=tier, trigger=trigger, description=description
    )
    suite_run.shards = [
        SuiteShard(position=i, label=plan.label, cases=plan.cases) for i, plan in enumerate(shards)
    ]
    session.add(suite_run)
    session.flush()
    return suite_run


Outcome = Literal["claimed", "busy", "finished"]


@dataclass(frozen=True)
class Claim:
    """What claiming a shard gave: it is ours now, another worker holds it, or it is over."""

    outcome: Outcome
    shard: SuiteShard
    wait_s: float = 0.0  # "busy": when the other worker's lease lapses
    lease: str = ""  # "claimed": the attempt's lease id, which renews and finishes it


def claim_shard(session: Session, shard_id: int, worker: str, lease_s: float) -> Claim:
    """Take the shard's lease if it is free (pending, or its holder stopped renewing)."""
    now, lease = utcnow(), uuid.uuid4().hex
    free = or_(
        SuiteShard.status == "pending",
        (SuiteShard.status == "running")
        & (SuiteShard.lease_until.is_(None) | (SuiteShard.lease_until <= now)),
    )
    taken = session.execute(
        update(SuiteShard)
        .where(SuiteShard.id == shard_id, free)
        .values(
            status="running",
            worker=worker,
            lease_id=lease,
            attempts=SuiteShard.attempts + 1,
            lease_until=now + timedelta(seconds=lease_s),
        )
        .execution_options(synchronize_session=False)
    )
    shard = _locked_shard(session, shard_id)
    if taken.rowcount == 1:  # type: ignore[attr-defined]
        return Claim("claimed", shard, lease=lease)
    if shard.status not in UNFINISHED:
        return Claim("finished", shard)
    wait = _seconds_left(shard.lease_until, now)
    return Claim("busy", shard, wait)


def renew_lease(session: Session, shard_id: int, lease: str, lease_s: float) -> bool:
    """Extend the attempt's lease; False when the shard is no longer this attempt's."""
    shard = _locked_shard(session, shard_id)
    if not _held_by(shard, lease):
        return False
    shard.lease_until = utcnow() + timedelta(seconds=lease_s)
    return True


def release_shard(session: Session, shard_id: int, lease: str, reason: str) -> bool:
    """Give a failed attempt back (pending again), keeping why it failed."""
    shard = _locked_shard(session, shard_id)
    if not _held_by(shard, lease):
        return False
    shard.status, shard.lease_until, shard.reason = "pending", None, reason
    after_commit(session, SHARDS.labels(outcome="released").inc)
    return True


def finish_shard(
    session: Session, shard_id: int, lease: str, rows: list[dict[str, Any]] | None, reason: str
) -> bool:
    """Record the shard's rows (``done``), or its cases as failed with ``reason`` (no rows).

    Rows that would not pass ingestion fail the shard here, with the validation error, so one
    bad shard cannot keep the whole run from being ingested.
    """
    shard = _locked_shard(session, shard_id)
    if not _held_by(shard, lease):
        return False
    if rows is not None:
        try:
            ROWS.validate_python(rows)
        except ValidationError as exc:
            rows, reason = None, f"the shard's results do not validate: {exc}"
    shard.status = "done" if rows is not None else "failed"
    shard.rows = rows if rows is not None else _failed(shard.cases, reason)
    shard.reason, shard.lease_until, shard.finished_at = reason[:4000], None, utcnow()
    after_commit(session, SHARDS.labels(outcome=shard.status).inc)
    return True


def _failed(cases: list[dict[str, Any]], reason: str) -> list[dict[str, Any]]:
    return [row for ident in cases for row in failed_rows(ident, reason)]


def finalize(
    session: Session, suite_run_id: int, drift_threshold: float = pools.DEFAULT_THRESHOLD
) -> Run | None:
    """Ingest the run once every shard is over; None while shards are still to run.

    A run that cannot be ingested (its rows do not validate together, its key was taken by
    another payload) fails the suite run with the reason instead of leaving it running. A run
    whose shards several nodes ran (a pool) has its nodes judged against each other
    (``pools.check_pool``, with ``drift_threshold``).
    """
    suite_run = session.get(SuiteRun, suite_run_id, with_for_update=True)
    if suite_run is None:
        raise SuiteRunNotFound(suite_run_id)
    if suite_run.trigger == RERUN_TRIGGER:  # pooled by app.anomalies.confirmation.finish_rerun
        return None
    if suite_run.trigger in (LOCALIZE_TRIGGER, COMPARE_TRIGGER):  # evidence, never a run
        return None
    if suite_run.run_id is not None:
        return session.get(Run, suite_run.run_id)
    if suite_run.status != "running" or any(s.status in UNFINISHED for s in suite_run.shards):
        return None
    if suite_run.shards and not any(shard.rows for shard in suite_run.shards):
        # A command suite's shards know their cases once they ran: failed, they have no rows.
        reasons = "; ".join(f"{s.label}: {s.reason}" for s in suite_run.shards if s.reason)
        suite_run.status, suite_run.reason = "failed", f"no results: {reasons}"[:4000]
        suite_run.finished_at = utcnow()
        return None
    try:
        with session.begin_nested():  # a refused ingest leaves nothing behind
            run = ingest_run(session, _run_payload(suite_run), source="worker").run
    except (ValidationError, DomainError) as exc:
        reason = f"the run could not be ingested: {exc}"
        log.error("suite run %s failed: %s", suite_run.id, reason)
        suite_run.status, suite_run.reason = "failed", reason[:4000]
        suite_run.finished_at = utcnow()
        return None
    suite_run.run_id, suite_run.status, suite_run.finished_at = run.id, "finished", utcnow()
    for shard in suite_run.shards:  # the run keeps the kernel profiles and code now, once
        if shard.rows:
            shard.rows = payload_rows(shard.rows)["results"]
    if len({shard.worker for shard in suite_run.shards}) > 1:
        _check_pool(session, run, drift_threshold)
    return run


def _check_pool(session: Session, run: Run, threshold: float) -> None:
    """Judge a pooled run's nodes; a failure to judge is logged and never loses the run."""
    try:
        with session.begin_nested():
            pools.check_pool(session, run, threshold)
    except Exception:  # the run is stored either way: drift is a hint on top of it
        log.exception("run %s: the pool's nodes could not be judged", run.id)


def stale_shards(session: Session, machine: str | None = None) -> list[tuple[SuiteShard, float]]:
    """Unfinished shards and how long until each may be claimed again (0: now)."""
    query = select(SuiteShard).join(SuiteRun).where(SuiteShard.status.in_(UNFINISHED))
    if machine is not None:
        query = query.where(SuiteRun.machine == machine)
    now = utcnow()
    return [(shard, _seconds_left(shard.lease_until, now)) for shard in session.scalars(query)]


def _seconds_left(lease_until: datetime | None, now: datetime) -> float:
    return max((lease_until - now).total_seconds(), 0.0) if lease_until else 0.0


def _run_payload(suite_run: SuiteRun) -> RunIn:
    return RunIn.model_validate(
        {
            "key": suite_run.key,
            **suite_run.description,
            "trigger": suite_run.trigger,
            "tier": suite_run.tier,
            "started_at": suite_run.started_at.isoformat(),
            "finished_at": max(s.finished_at for s in suite_run.shards if s.finished_at).isoformat()
            if suite_run.shards
            else suite_run.started_at.isoformat(),
            **payload_rows(
                _with_node(row, shard.worker)
                for shard in suite_run.shards
                for row in shard.rows or []
            ),
        }
    )


def _with_node(row: dict[str, Any], node: str) -> dict[str, Any]:
    """A shard's result row with the node that measured it in its ``extra`` (a pool's node)."""
    if not node:
        return row
    extra = row.get("extra")
    return {**row, "extra": {**(extra if isinstance(extra, dict) else {}), "node": node}}


class SuiteRunNotFound(NotFound):
    """No suite run with this id."""

    def __init__(self, suite_run_id: int) -> None:
        super().__init__(f"no suite run {suite_run_id}")


def get_suite_run(session: Session, suite_run_id: int) -> SuiteRun:
    """One suite run with its shards."""
    options = [selectinload(SuiteRun.shards)]
    if (suite_run := session.get(SuiteRun, suite_run_id, options=options)) is None:
        raise SuiteRunNotFound(suite_run_id)
    return suite_run


def list_suite_runs(
    session: Session, machine: str | None, status: str | None, offset: int, limit: int
) -> tuple[list[SuiteRun], int]:
    """A page of suite runs, newest first, with their shards."""
    query = select(SuiteRun)
    if machine is not None:
        query = query.where(SuiteRun.machine == machine)
    if status is not None:
        query = query.where(SuiteRun.status == status)
    page = query.options(selectinload(SuiteRun.shards))
    return count_and_page(session, page, [SuiteRun.id.desc()], offset, limit)


def _locked_shard(session: Session, shard_id: int) -> SuiteShard:
    shard = session.get(SuiteShard, shard_id, with_for_update=True, populate_existing=True)
    if shard is None:
        raise NotFound(f"no suite shard {shard_id}")
    return shard


def _held_by(shard: SuiteShard, lease: str) -> bool:
    return shard.status == "running" and bool(lease) and shard.lease_id == lease
