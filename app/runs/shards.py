"""Sharded runs: the jobs of one CI workflow upload parts of one run, in any order, retried.

A run is one machine's, on one channel: a workflow whose jobs run on several machines (a
matrix over GPU kinds) makes a run per machine and channel, so a shard's run key is the
workflow's key with its machine and channel (``run_key``). The first shard's upload creates
the run (``partial``, unless it is the only one expected);
each later one adds its results under the same key. A shard is known by its name: a retry
with the same payload changes nothing, a different payload under a stored shard's name is
refused (409). Results a stored shard already holds (the same series) are kept as they are
and counted as duplicates. The run becomes ``completed`` (and is detected) when its expected
shards are in, or once none came for ``BENCHWATCH_RUN_SHARDS_QUIET_S``
(``complete_quiet_runs``).
"""

from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.core.bounds import fit
from app.core.db import utcnow
from app.core.errors import Conflict
from app.runs.models import Run, RunShard
from app.runs.schemas import RunIn

PARTIAL, COMPLETED = "partial", "completed"


class ShardReused(Conflict):
    """A different payload was posted under the name of a shard the run already holds."""

    def __init__(self, key: str, shard: str) -> None:
        super().__init__(
            f"run {key!r} already holds shard {shard!r} with a different payload; a retry "
            "must send the same payload, another job needs another shard name"
        )


class ShardMismatch(Conflict):
    """A shard that names another commit than its run."""

    def __init__(self, key: str, field: str, stored: str, given: str) -> None:
        super().__init__(
            f"run {key!r} is of {field} {stored!r}, this shard of {given!r}: the shards of "
            "one run share its commit"
        )


KEY_LENGTH = 256  # of Run.key


def run_key(run_in: RunIn) -> str:
    """The key of the run a shard belongs to: its workflow's, on its machine and channel."""
    key = f"{run_in.key}/{run_in.machine.name}/{run_in.environment.channel}"
    return fit(key, KEY_LENGTH, key, 16)


def initial_status(run_in: RunIn) -> str:
    """A new run's status: partial while more shards are expected."""
    if run_in.shard is None or run_in.shard.expected == 1:
        return COMPLETED
    return PARTIAL


def known_shard(session: Session, run: Run, run_in: RunIn, digest: str) -> bool:
    """Whether the run holds this shard already (a retry); a different payload is refused.

    Raises:
        ShardReused: the shard's name is stored with another payload.
        ShardMismatch: the shard's commit is not the run's.
    """
    assert run_in.shard is not None
    stored = session.scalar(
        select(RunShard).where(RunShard.run_id == run.id, RunShard.name == run_in.shard.name)
    )
    if stored is not None:
        if stored.payload_hash != digest:
            raise ShardReused(run.key, run_in.shard.name)
        return True
    if run.commit != run_in.commit:
        raise ShardMismatch(run.key, "commit", run.commit, run_in.commit)
    return False


def record_shard(
    session: Session,
    run: Run,
    run_in: RunIn,
    digest: str,
    added: int,
    duplicates: int,
) -> None:
    """Note the shard, and complete the run if it was the last one expected."""
    assert run_in.shard is not None
    session.add(
        RunShard(
            run_id=run.id,
            name=run_in.shard.name,
            payload_hash=digest,
            result_count=added,
            duplicates=duplicates,
            received_at=utcnow(),
        )
    )
    if run.expected_shards is None:
        run.expected_shards = run_in.shard.expected
    session.flush()
    received = session.scalar(select(func.count()).where(RunShard.run_id == run.id)) or 0
    if run.status == PARTIAL and run.expected_shards and received >= run.expected_shards:
        run.status = COMPLETED


def widen(run: Run, run_in: RunIn, coverage: dict[str, int]) -> None:
    """The run's times and counts, with a further shard's."""
    started = run_in.started_at
    if started is not None and started < run.started_at:
        run.started_at = started
    finished = run_in.finished_at
    if finished is not None and (run.finished_at is None or finished > run.finished_at):
        run.finished_at = finished
    for column, count in coverage.items():
        setattr(run, column, getattr(run, column) + count)


def complete_quiet_runs(
    session: Session, quiet: timedelta, now: datetime | None = None
) -> list[int]:
    """Complete the partial runs no shard came to for ``quiet``; their ids (to detect).

    A run that got fewer shards than it expected says so in ``extra.shards``.
    """
    cutoff = (now or utcnow()) - quiet
    newest = (
        select(RunShard.run_id, func.max(RunShard.received_at).label("last"), func.count())
        .group_by(RunShard.run_id)
        .subquery()
    )
    rows = session.execute(
        select(Run, newest.c[2])
        .join(newest, newest.c.run_id == Run.id)
        .where(Run.status == PARTIAL, newest.c.last < cutoff)
        .order_by(Run.id)
        .with_for_update(of=Run)
    ).all()
    for run, received in rows:
        run.status = COMPLETED
        run.extra = {
            **run.extra,
            "shards": {"received": received, "expected": run.expected_shards, "quiet": True},
        }
    return [run.id for run, _ in rows]
