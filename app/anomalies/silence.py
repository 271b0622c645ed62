"""Silent machines: a machine and channel that stopped reporting opens a finding.

A machine and channel is judged by its schedule when it has one, else by the cadence learned
from its runs. Its schedules are those of ``BENCHWATCH_SCHEDULES`` whose ``machine`` is its
name and whose ``channel`` is its runs' channel (several: the union of their fire times).

- **Scheduled**: silent once two fire times have passed since its newest run started, the later
  more than a grace period ago: the larger of ``MIN_GRACE`` and half the schedule's interval
  (the median interval of its fire times). The grace is the time a suite takes to be picked up,
  run and uploaded, since a run is stored only then; half an interval makes a regular schedule
  silent about when the learned rule would (two intervals and a half after its last fire time),
  while a schedule that skips days (weekdays only) is not silent over its weekend. A schedule
  needs no history, so a new machine with one run is judged too. A schedule that fires fewer
  than twice within ``RETIRED_AFTER`` of the newest run never makes it silent, and a scheduled
  machine that never ran has no finding: there is no run to anchor one, and a worker that never
  started shows in beat's and the worker's logs.
- **Learned**: the median interval between the starts of its last ``CADENCE_RUNS`` runs (at
  least ``MIN_RUNS`` runs, so a machine that ran twice has no cadence yet). It is silent when
  its newest run started more than ``MISSED_INTERVALS`` intervals ago: two runs missed, not one.

Either way a machine quiet for longer than ``RETIRED_AFTER`` is retired, not silent. The sweep
(``jobs.sweep_silence``) opens one ``MachineSilence`` per silence, in a group of its own, with
the expected interval in ``expected_every_s``; the machine's next run ends it
(``end_silences``, from detection).
"""

import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Literal

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.anomalies.models import AlertGroup, MachineSilence
from app.benchmarks.models import Machine
from app.core.config import Schedule
from app.core.cron import Cron, fire_times, parse_cron
from app.core.db import utcnow
from app.runs.branches import is_branch_channel
from app.runs.history import place_runs
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
# A scheduled run is stored after it was picked up, ran and uploaded: at least this long after
# its fire time, however often the schedule fires.
MIN_GRACE = timedelta(hours=1)
# A fire time this soon after a run's start is the one that run answered: the worker stamps
# the start with its own clock, which may be a little ahead of beat's.
EARLY = timedelta(minutes=5)
Source = Literal["schedule", "history"]


@dataclass(frozen=True)
class Cadence:
    """How often a machine and channel reports, its newest run, and when it turns silent."""

    machine_id: int
    channel: str
    every: timedelta  # the expected interval between runs
    last_run_id: int
    last_started_at: datetime
    silent_after: datetime | None  # None: never, before it is retired
    source: Source  # where ``every`` and ``silent_after`` come from

    def silent(self, now: datetime) -> bool:
        """Whether it is silent at ``now``: past ``silent_after``, and not retired."""
        if self.silent_after is None or now - self.last_started_at > RETIRED_AFTER:
            return False
        return self.silent_after < now


def cadences(session: Session, schedules: Sequence[Schedule] = ()) -> list[Cadence]:
    """Every machine and channel with a cadence, in the order of their ids and names.

    One with a schedule in ``schedules`` has its schedule's; any other, its learned one.
    """
    planned = scheduled_crons(session, schedules)
    pairs = session.execute(
        select(Run.machine_id, Run.channel).distinct().order_by(Run.machine_id, Run.channel)
    ).all()
    found = []
    for machine_id, channel in pairs:
        if is_branch_channel(channel):
            continue  # a branch's runs come when people push, on no cadence
        newest = session.execute(
            place_runs(
                machine_id,
                channel,
                None,
                Run.id,
                Run.started_at,
                newest_first=True,
                limit=CADENCE_RUNS,
            )
        ).all()
        runs = [(r.id, r.started_at) for r in newest]
        crons = planned.get((machine_id, channel))
        if crons:
            cadence = scheduled_cadence(machine_id, channel, crons, runs[0])
        else:
            cadence = cadence_of(machine_id, channel, runs)
        if cadence is not None:
            found.append(cadence)
    return found


def scheduled_crons(
    session: Session, schedules: Sequence[Schedule]
) -> dict[tuple[int, str], list[Cron]]:
    """The crons of each machine (by id) and channel that ``schedules`` name.

    A schedule of a machine that never reported names none: it has no id yet.
    """
    if not schedules:
        return {}
    names = {s.machine for s in schedules}
    found = session.execute(select(Machine.name, Machine.id).where(Machine.name.in_(names)))
    ids = dict(found.all())
    planned: dict[tuple[int, str], list[Cron]] = defaultdict(list)
    for s in schedules:
        if s.machine in ids:
            planned[(ids[s.machine], s.channel)].append(parse_cron(s.cron))
    return planned


def scheduled_cadence(
    machine_id: int, channel: str, crons: Sequence[Cron], last: tuple[int, datetime]
) -> Cadence | None:
    """The cadence of a scheduled machine and channel whose newest run is ``last`` (id, start).

    Its fire times are those of the ``RETIRED_AFTER`` after that run (after it is retired,
    nothing matters), ``EARLY`` after its start. None when they are fewer than two: no interval,
    and never two missed.
    """
    run_id, started_at = last
    start, end = started_at + EARLY, started_at + RETIRED_AFTER
    fires = sorted({at for cron in crons for at in fire_times(cron, start, end)})
    if len(fires) < 2:
        return None
    every: timedelta = statistics.median(b - a for a, b in pairwise(fires))  # type: ignore[type-var]  # it sorts and averages
    grace = max(MIN_GRACE, every / 2)
    return Cadence(machine_id, channel, every, run_id, started_at, fires[1] + grace, "schedule")


def cadence_of(
    machine_id: int, channel: str, newest: Sequence[tuple[int, datetime]]
) -> Cadence | None:
    """The learned cadence of a machine and channel from its newest runs (id, start), newest first.

    None with fewer than ``MIN_RUNS`` runs, or too few intervals of ``MIN_INTERVAL`` or more.
    """
    intervals = [
        a[1] - b[1] for a, b in pairwise(newest[:CADENCE_RUNS]) if a[1] - b[1] >= MIN_INTERVAL
    ]
    if len(newest) < MIN_RUNS or len(intervals) < MIN_RUNS - 1:
        return None
    every: timedelta = statistics.median(intervals)  # type: ignore[type-var]  # it sorts and averages
    run_id, started_at = newest[0]
    silent_after = started_at + every * MISSED_INTERVALS
    return Cadence(machine_id, channel, every, run_id, started_at, silent_after, "history")


def open_silences(
    session: Session, now: datetime | None = None, schedules: Sequence[Schedule] = ()
) -> list[MachineSilence]:
    """A finding for each machine and channel silent at ``now`` that has none open yet.

    ``schedules``: the deployment's (``Settings.SCHEDULES``); without them every machine is
    judged by its learned cadence.
    """
    now = now or utcnow()
    opened = []
    for cadence in cadences(session, schedules):
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
