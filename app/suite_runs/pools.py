"""Pools: the node of a pooled run whose timings drift from the rest of its pool.

Several nodes may serve one machine name (``benchwatch worker --machine M --node N`` on each):
they take the run's shards as they come, and every result records its node (``extra.node``).
A node that drifts (throttling, a failing fan, another driver) would then read as a regression
of whichever cases it happened to run. Once a pooled run is stored, each node is judged:

- each time-like series of the run (a time unit, lower is better; not compile times, which a
  node's cold caches move) is set against its own recent history: its value over its median in
  the last ``WINDOW`` runs of the machine, channel and project, whichever node measured them;
- a node's move is the median of those ratios over the series it measured. A change in the
  build moves every node alike, drift only the node's own;
- the pool's move is the median of its nodes' moves (in a pool of two, the other node's); a
  node's ratio is its move over the pool's. It is flagged when that is off by more than the
  threshold (``BENCHWATCH_POOL_DRIFT_THRESHOLD``) and by more than ``NOISE_Z`` standard errors
  of the two medians (from the series' own scatter), so noise is not drift. A node with fewer
  than ``MIN_SERIES`` such series is not judged.

In a pool of two both nodes are flagged (each disagrees with the other); their moves from
history say which one changed. The verdict is kept in the run's ``extra.pool``, shown by the
API and on the run page.
"""

import logging
import math
import statistics
from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Any

from pydantic import BaseModel, ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.benchmarks import vocabulary as vocab
from app.benchmarks.models import Metric, Series
from app.runs.history import earlier_runs
from app.runs.models import Result, Run

DEFAULT_THRESHOLD = 0.05  # BENCHWATCH_POOL_DRIFT_THRESHOLD's default
WINDOW = 10  # earlier runs of the machine and channel a series' history is read from
MIN_SERIES = 6  # time-like series with a history a node must have measured to be judged
NOISE_Z = 3.0  # how many standard errors a node's ratio must be off by, besides the threshold
# The median's standard error is this times the scatter's over the square root of the count
# (sqrt(pi / 2), for normal errors), and the scatter 1.4826 median absolute deviations.
MEDIAN_SE = math.sqrt(math.pi / 2)
MAD_SIGMA = 1.4826
EXTRA_KEY = "pool"  # in Run.extra
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Measured:
    """One value of a run: its series, the node that measured it."""

    series_id: int
    node: str
    value: float


@dataclass(frozen=True)
class NodeVerdict:
    """How one node of a pooled run compares with the rest of its pool."""

    node: str
    series: int  # time-like series with a history it measured in this run
    moved: float | None  # its series over their history (median ratio); None: not judged
    ratio: float | None  # its move over the pool's; None: not judged
    flagged: bool
    note: str  # why it is not judged, or what the flag means


class NodeRead(BaseModel):
    """A node's verdict as stored (and as read back from ``Run.extra``, which is any JSON)."""

    node: str
    series: int
    moved: float | None
    ratio: float | None
    flagged: bool
    note: str


class PoolRead(BaseModel):
    """A pooled run's verdict: each node, those flagged, and what they were judged with."""

    threshold: float
    history_runs: int
    nodes: list[NodeRead]
    flagged: list[str]


def judge(
    measured: list[Measured],
    history: dict[int, float],
    threshold: float,
    min_series: int = MIN_SERIES,
) -> list[NodeVerdict]:
    """Each node of ``measured`` against its pool, by its series' moves from ``history``.

    ``history``: each series' median value in the runs before. Values that are not positive
    cannot be compared as ratios and are left out.
    """
    moves: dict[str, list[float]] = defaultdict(list)
    for m in measured:
        base = history.get(m.series_id)
        if base is not None and base > 0 and m.value > 0:
            moves[m.node].append(math.log(m.value / base))
    nodes = sorted({m.node for m in measured})
    judged = {node: moves[node] for node in nodes if len(moves[node]) >= min_series}
    centre = {node: statistics.median(logs) for node, logs in judged.items()}
    error = {node: _median_error(logs) for node, logs in judged.items()}
    verdicts = []
    for node in nodes:
        count = len(moves[node])
        others = [other for other in judged if other != node]
        if node not in judged or not others:
            why = (
                f"{count} time-like series with a history; {min_series} needed"
                if node not in judged
                else "no other node of the pool measured enough series to compare with"
            )
            verdicts.append(NodeVerdict(node, count, None, None, False, why))
            continue
        # The pool's typical node; in a pool of two the median would be halfway: the other.
        pool = others if len(judged) == 2 else list(judged)
        reference = statistics.median(centre[n] for n in pool)
        off = centre[node] - reference
        noise = math.hypot(error[node], statistics.median(error[n] for n in others))
        ratio = math.exp(off)
        flagged = abs(ratio - 1) > threshold and abs(off) > NOISE_Z * noise
        note = ""
        if flagged:
            pace = "slower" if ratio > 1 else "faster"
            note = f"{abs(ratio - 1):.1%} {pace} than the pool over {count} series"
            if len(judged) == 2:  # each disagrees with the other
                note += "; a pool of two: its move from history says which node changed"
        elif abs(ratio - 1) > threshold:
            note = f"off by {abs(ratio - 1):.1%}, within its series' noise"
        verdicts.append(
            NodeVerdict(
                node, count, round(math.exp(centre[node]), 4), round(ratio, 4), flagged, note
            )
        )
    return verdicts


def _median_error(logs: list[float]) -> float:
    """The standard error of the median of ``logs``, from their median absolute deviation."""
    middle = statistics.median(logs)
    spread = MAD_SIGMA * statistics.median(abs(x - middle) for x in logs)
    return MEDIAN_SE * spread / math.sqrt(len(logs))


def check_pool(session: Session, run: Run, threshold: float = DEFAULT_THRESHOLD) -> PoolRead | None:
    """Judge a stored run's nodes and keep the verdict in ``run.extra``; None: one node only.

    A flagged node is logged as a warning.
    """
    time_like = _time_like_metrics(session)
    measured = [
        Measured(series_id, extra["node"], value)
        for series_id, value, extra in session.execute(
            select(Result.series_id, Result.value, Result.extra)
            .join(Series, Result.series_id == Series.id)
            .where(
                Result.run_id == run.id,
                Result.status == "ok",
                Result.value.is_not(None),
                Series.metric_id.in_(time_like),
            )
        )
        if isinstance(extra, dict) and isinstance(extra.get("node"), str)
    ]
    if len({m.node for m in measured}) < 2:
        return None
    earlier = list(session.scalars(earlier_runs(run, WINDOW)))
    verdicts = judge(measured, _history(session, run.id, earlier, time_like), threshold)
    verdict = PoolRead(
        threshold=threshold,
        history_runs=len(earlier),
        nodes=[NodeRead(**asdict(v)) for v in verdicts],
        flagged=[v.node for v in verdicts if v.flagged],
    )
    run.extra = {**(run.extra or {}), EXTRA_KEY: verdict.model_dump()}  # a new dict: JSON
    for v in verdicts:
        if v.flagged:
            log.warning(
                "run %s on %s: node %s drifted from its pool: %s",
                run.id,
                run.machine.name,
                v.node,
                v.note,
            )
    return verdict


def _time_like_metrics(session: Session) -> list[int]:
    """Metrics in a time unit whose lower value is better, compile times aside."""
    return [
        metric.id
        for metric in session.scalars(select(Metric).where(Metric.higher_is_better.is_(False)))
        if vocab.UNITS.get(metric.unit, ("",))[0] == "time" and metric.kind != "compile"
    ]


def _history(
    session: Session, run_id: int, run_ids: list[int], metric_ids: list[int]
) -> dict[int, float]:
    """The median value over ``run_ids`` of each time-like series of run ``run_id``."""
    if not run_ids:
        return {}
    in_run = select(Result.series_id).where(Result.run_id == run_id)
    values: dict[int, list[float]] = defaultdict(list)
    rows = session.execute(
        select(Result.series_id, Result.value)
        .join(Series, Result.series_id == Series.id)
        .where(
            Result.run_id.in_(run_ids),
            Result.series_id.in_(in_run),
            Result.status == "ok",
            Series.metric_id.in_(metric_ids),
        )
    )
    for series_id, value in rows:
        if value is not None:
            values[series_id].append(value)
    return {series_id: statistics.median(found) for series_id, found in values.items()}


def read_pool(extra: dict[str, Any] | None) -> PoolRead | None:
    """A run's pool verdict, if it has one that reads as one (``extra`` is any uploader's JSON)."""
    found = (extra or {}).get(EXTRA_KEY)
    if not isinstance(found, dict):
        return None
    try:
        return PoolRead.model_validate(found)
    except ValidationError:
        return None
