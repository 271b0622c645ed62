"""Silent machines: a machine and channel that stopped reporting opens a finding.

Each machine and channel's cadence is learned from its runs: the median interval between the
starts of its last ``CADENCE_RUNS`` runs (at least ``MIN_RUNS`` runs, so a machine that ran
twice has no cadence yet). It is silent when its newest run started more than
``MISSED_INTERVALS`` intervals ago: two runs missed, not one. The sweep
(``jobs.sweep_silence``) opens one ``MachineSilence`` per silence, in a group of its own;
the machine's next run ends it (``end_silences``, from detection).
"""

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import pairwise

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.anomalies.models import AlertGroup, MachineSilence
from app.core.db import utcnow
from app.runs.models import Run

CADENCE_RUNS = 10  # the newest runs whose intervals give the cadence
MIN_RUNS = 4  # fewer runs: no cadence, no silence
# Silent after this many intervals without a run: two missed runs, not one (one missed run
# with a little jitter is already two intervals).
MISSED_INTERVALS = 2.5
MIN_INTERVAL = timedelta(minutes=5)  # runs closer together than this are one burst
# A machine whose last run is older than this is retired, not silent: an upgrade or a first
# sweep over an old history does not open a silence for every machine ever seen.
RETIRED_AFTER = timedelta(days=14)


@dataclass(frozen=True)
class Cadence:
    """How often a machine and channel reports, and its newest run."""

    machine_id: int
    channel: str
    every: timedelta
    last_run_id: int
    last_started_at: datetime

    def silent(self, now: datetime) -> bool:
        """Whether it has missed ``MISSED_INTERVALS`` of its runs by ``now``, not retired."""
        quiet = now - self.last_started_at
        return self.every * MISSED_INTERVALS < quiet <= RETIRED_AFTER


def cadences(session: Session) -> list[Cadence]:
    """Every machine and channel with a cadence, in the order of their ids and names."""
    pairs = session.execute(
        select(Run.machine_id, Run.channel).distinct().order_by(Run.machine_id, Run.channel)
    ).all()
    found = []
    for machine_id, channel in pairs:
        newest = session.execute(
            select(Run.id, Run.started_at)
            .where(Run.machine_id == machine_id, Run.channel == channel)
            .order_by(Run.started_at.desc(), Run.id.desc())
            .limit(CADENCE_RUNS)
        ).all()
        cadence = cadence_of(machine_id, channel, [(r.id, r.started_at) for r in newest])
        if cadence is not None:
            found.append(cadence)
    return found


def cadence_of(
    machine_id: int, channel: str, newest: Sequence[tuple[int, datetime]]
) -> Cadence | None:
    """The cadence of a machine and channel from its newest runs (id, start), newest first.

    None with fewer than ``MIN_RUNS`` runs, or too few intervals of ``MIN_INTERVAL`` or more.
    """
    intervals = [
        a[1] - b[1] for a, b in pairwise(newest[:CADENCE_RUNS]) if a[1] - b[1] >= MIN_INTERVAL
    ]
    if len(newest) < MIN_RUNS or len(intervals) < MIN_RUNS - 1:
        return None
    every: timedelta = statistics.median(intervals)  # type: ignore[type-var]  # it sorts and averages
    return Cadence(machine_id, channel, every, newest[0][0], newest[0][1])


def open_silences(session: Session, now: datetime | None = None) -> list[MachineSilence]:
    """A finding for each machine and channel silent at ``now`` that has none open yet."""
    now = now or utcnow()
    opened = []
    for cadence in cadences(session):
        if not cadence.silent(now):
            continue
        known = session.scalar(
            select(MachineSilence.id).where(
                MachineSilence.machine_id == cadence.machine_id,
                MachineSilence.channel == cadence.channel,
                MachineSilence.last_run_id == cadence.last_run_id,
            )
        )
        if known is not None:
            continue
        group = AlertGroup(
            machine_id=cadence.machine_id,
            channel=cadence.channel,
            first_bad_run_id=cadence.last_run_id,
            last_good_run_id=cadence.last_run_id,
            environment_diff={},
        )
        silence = MachineSilence(
            group=group,
            machine_id=cadence.machine_id,
            channel=cadence.channel,
            last_run_id=cadence.last_run_id,
            expected_every_s=cadence.every.total_seconds(),
            silent_since=cadence.last_started_at,
            status="new",
        )
        session.add_all([group, silence])
        opened.append(silence)
    session.flush()
    return opened


def end_silences(session: Session, run: Run) -> list[MachineSilence]:
    """The open silences of the run's machine and channel, ended by it.

    A run older than the silence (a backfill) ends none.
    """
    query = select(MachineSilence).where(
        MachineSilence.machine_id == run.machine_id,
        MachineSilence.channel == run.channel,
        MachineSilence.ended_by_run_id.is_(None),
        MachineSilence.silent_since < run.started_at,
    )
    ended = list(session.scalars(query))
    for silence in ended:
        silence.ended_by_run_id = run.id
    return ended
