"""Retention: old raw samples and old branch runs give way; values and history stay.

Two settings, each off at 0 (keep forever):

- ``BENCHWATCH_RETAIN_SAMPLES_DAYS``: a result measured longer ago than this loses its raw
  samples (``samples`` becomes NULL); its value, status and everything derived from it stay.
  Samples are most of a result's bytes, and only recent ones are looked at (a run page, a
  distribution); history, baselines and detection read values. A run started before the
  cutoff loses the generated code it kept (``kernel_code``) with them; its kernel profiles
  stay (they are small, and a step's kernel diff reads them).
- ``BENCHWATCH_RETAIN_BRANCH_RUNS_DAYS``: a run of a branch other than its channel's default
  (stored under ``<channel>@<branch>``, ``app.runs.branches``: pull requests and feature
  branches) that started longer ago than this is deleted with its results, shards and the
  rows that point at it, as an admin's delete does (``app.corrections``), without judging
  anything again: a branch's runs feed no history.

The work goes in bounded batches of runs, each its own transaction, so neither locks nor
undo grow with the history. Each pass that changes something records one audit entry with
its counts; the samples' cutoff it reached is where the next pass starts (a daily pass
touches a day of results, not the whole history again).
"""

from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Select, String, cast, delete, func, null, select, update
from sqlalchemy.orm import Session

from app.audit import service as audit
from app.audit.models import AuditEntry
from app.core.db import Database, utcnow
from app.corrections.service import remove_references
from app.kernels.models import KernelCode
from app.runs.branches import SEPARATOR
from app.runs.models import Result, Run

ACTOR = "benchwatch retention"
ACTION = "retention.apply"
TARGET = "retention"
RUN_BATCH = 20  # runs per transaction: about 100,000 results of a large platform's runs
# A further shard can move a run's start earlier than the last pass's cutoff: look back this
# far behind it.
SLACK = timedelta(days=2)


@dataclass
class Swept:
    """What a retention pass changed (or, in a dry run, would change)."""

    samples_cutoff: datetime | None = None
    samples_cleared: int = 0  # results whose samples went
    code_cleared: int = 0  # cases whose generated code went
    branch_cutoff: datetime | None = None
    runs_deleted: int = 0
    results_deleted: int = 0
    dry_run: bool = False

    def summary(self) -> dict[str, Any]:
        """The counts and cutoffs, as the audit log and the CLI show them."""
        found = asdict(self)
        for key in ("samples_cutoff", "branch_cutoff"):
            found[key] = found[key].isoformat() if found[key] else None
        return found


def apply_retention(
    database: Database,
    samples_days: int,
    branch_runs_days: int,
    *,
    dry_run: bool = False,
    now: datetime | None = None,
    batch: int = RUN_BATCH,
) -> Swept:
    """Clear old samples and delete old branch runs as the settings say (0: keep forever).

    A dry run counts what would go and changes nothing (no audit entry either).
    """
    now = now or utcnow()
    swept = Swept(dry_run=dry_run)
    if samples_days > 0:
        swept.samples_cutoff = now - timedelta(days=samples_days)
        swept.samples_cleared, swept.code_cleared = _clear_samples(
            database, swept.samples_cutoff, dry_run, batch
        )
    if branch_runs_days > 0:
        swept.branch_cutoff = now - timedelta(days=branch_runs_days)
        swept.runs_deleted, swept.results_deleted = _delete_branch_runs(
            database, swept.branch_cutoff, dry_run, batch
        )
    if not dry_run and (swept.samples_cutoff or swept.branch_cutoff):
        with database.session_scope() as session:
            audit.record(session, ACTOR, ACTION, TARGET, None, swept.summary())
    return swept


def _clear_samples(
    database: Database, cutoff: datetime, dry_run: bool, batch: int
) -> tuple[int, int]:
    """Clear the samples of results measured before ``cutoff`` and the code of its runs.

    ``samples`` becomes NULL; the generated code of runs started before it is deleted.
    Returns how many results had samples, and how many cases had code.
    """
    with database.session_scope() as session:
        since = _last_samples_cutoff(session)
    start = None if since is None else since - SLACK  # after it: nothing new to clear
    # SQLite's JSON columns hold a missing list as the text 'null' (as the writer stores it).
    held = Result.samples.is_not(None) & (cast(Result.samples, String) != "null")
    older = (Result.measured_at < cutoff) & held
    cleared = code = 0
    for run_ids in _run_batches(database, _runs_between(start, cutoff), batch):
        with database.session_scope() as session:
            chosen = Result.run_id.in_(run_ids) & older
            kept_code = KernelCode.run_id.in_(run_ids)
            if dry_run:
                cleared += session.scalar(select(func.count()).where(chosen)) or 0
                code += session.scalar(select(func.count()).where(kept_code)) or 0
            else:
                done = session.execute(update(Result).where(chosen).values(samples=null()))
                cleared += done.rowcount  # type: ignore[attr-defined]
                gone = session.execute(delete(KernelCode).where(kept_code))
                code += gone.rowcount  # type: ignore[attr-defined]
    return cleared, code


def _last_samples_cutoff(session: Session) -> datetime | None:
    """Where the last pass that cleared samples stopped (None: none did)."""
    last = session.scalar(
        select(AuditEntry)
        .where(AuditEntry.action == ACTION, AuditEntry.target == TARGET)
        .order_by(AuditEntry.id.desc())
        .limit(1)
    )
    reached = last.after.get("samples_cutoff") if last is not None else None
    return datetime.fromisoformat(reached) if isinstance(reached, str) else None


def _runs_between(start: datetime | None, cutoff: datetime) -> Select[int]:
    query = select(Run.id).where(Run.started_at < cutoff)
    return query if start is None else query.where(Run.started_at >= start)


def _delete_branch_runs(
    database: Database, cutoff: datetime, dry_run: bool, batch: int
) -> tuple[int, int]:
    """Delete branch runs started before ``cutoff``; how many runs and results went."""
    query = select(Run.id).where(Run.channel.contains(SEPARATOR), Run.started_at < cutoff)
    runs = results = 0
    for run_ids in _run_batches(database, query, batch):
        with database.session_scope() as session:
            results += session.scalar(select(func.count()).where(Result.run_id.in_(run_ids))) or 0
            runs += len(run_ids)
            if dry_run:
                continue
            for run_id in run_ids:
                remove_references(session, run_id)
            session.execute(delete(Run).where(Run.id.in_(run_ids)))
    return runs, results


def _run_batches(database: Database, query: Select[int], batch: int) -> Iterator[list[int]]:
    """The runs ``query`` selects, ``batch`` at a time, by id (each batch read afresh)."""
    after = 0
    while True:
        with database.session_scope() as session:
            run_ids = list(
                session.scalars(query.where(Run.id > after).order_by(Run.id).limit(batch))
            )
        if not run_ids:
            return
        yield run_ids
        after = run_ids[-1]
