"""Aggregate findings' rules: the dashboard's aggregates of a group of models, judged (pure).

A group is a suite x config x precision x mode on one machine and channel; its aggregates
(``app.summaries.aggregates``, PyTorch's HUD definitions) are series of their own, stored per
run as ``AggregatePoint`` rows: pass rate, geomean speedup, mean compile time and mean
compression ratio. Each is judged, at each run, by

- ``step``: the change-point detector (``detectors.find_change_points``, default thresholds)
  on the aggregate's history, steps of ``MIN_STEP`` (3%) or more; only steps for the worse
  open a finding (pass rate, speedup and compression: higher is better; compile time: lower
  is better). An improvement is not recorded: it is either a recovery, which ends what it
  reverts, or good news;
- the dashboard's colouring rules, for the worse only: ``pass_rate_below`` (under 90% after
  a run at or above it), ``speedup_below_base`` (geomean under 0.95x of the base),
  ``compression_below_base`` (mean compression ratio under 0.9x of the base). The *base* is
  the previous run with the group on the machine and channel, and both sides are aggregated
  over the models the two runs have in common (HUD's "common models only"), so that a model
  added to the group or dropped from it does not move the comparison. Mean compile time has
  no dashboard rule: only the detector judges it.

A finding ends (``resolved_run_id``) at the first run where its aggregate recovered
(``recovered``): a pass rate back at 90%, any other back past the middle of its drop (a step
only from the earliest run the detector could have found it, ``MIN_SEGMENT`` points into the
new level). ``explained_by`` names the per-model findings of the group's cases on the machine
and channel in the finding's alert group or with a first bad run within
``grouping.GROUP_WINDOW`` of its own: failures for every aggregate (a failing model leaves the
pass rate and every mean), regressions for the worse of the metrics behind the aggregate
(``EXPLAINING_METRICS``). It is renewed at every run while its first bad run is among the
runs read (``aggregate_findings.HISTORY_RUNS``), as per-model steps are confirmed later.

Detection is idempotent: a rule finding is opened once per aggregate and first bad run, and
not again while one of the same rule is open; a step is not recorded where any finding of the
aggregate already is (give or take the detector's refinement radius).
"""

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np

from app.anomalies.detectors import REFINE_RADIUS, DetectorConfig, find_change_points
from app.anomalies.models import AggregateFinding
from app.benchmarks.comparison import direction, relative_change
from app.summaries import aggregates
from app.summaries.aggregates import GroupKey, ModelRecord

# Each aggregate, and whether higher is better.
STATS: dict[str, bool] = {
    "pass_rate": True,
    "geomean_speedup": True,
    "mean_compile_time_s": False,
    "mean_compression_ratio": True,
}
PASS_RATE_FLOOR = 0.90  # the dashboard's warning under this pass rate
BASE_RULES = {  # stat -> (rule, fraction of the base under which the rule fires)
    "geomean_speedup": ("speedup_below_base", 0.95),
    "mean_compression_ratio": ("compression_below_base", 0.90),
}
RULES = ("step", "pass_rate_below", *(rule for rule, _ in BASE_RULES.values()))
# Per-model regressions of these metrics explain a move of the aggregate (failures explain any).
EXPLAINING_METRICS: dict[str, frozenset[str]] = {
    "pass_rate": frozenset(),
    "geomean_speedup": frozenset({"speedup", "abs_latency"}),
    "mean_compile_time_s": frozenset({"compilation_latency"}),
    "mean_compression_ratio": frozenset({"compression_ratio", "dynamo_peak_mem"}),
}
DETECTOR = DetectorConfig()
MIN_SEGMENT = DETECTOR.min_segment
# An aggregate's step under this is not told, however quiet the aggregate: a mean over 50
# models is quiet enough for the detector to confirm a 1% move that no dashboard reader acts on
# (the dashboard itself colours changes of 5% and more).
MIN_STEP = 0.03

Key = tuple[str, str, str, str, str]  # suite, config, precision, mode, stat


@dataclass(frozen=True)
class Value:
    """An aggregate in one run, and how many models it is over."""

    value: float
    model_count: int


def stat_values(records: Sequence[ModelRecord]) -> dict[Key, Value]:
    """Each group's aggregates, only those it has data for (``aggregates.group_stats``).

    A pass rate needs speedup results (the dashboard's pass rate counts a model passing
    only with a speedup: without any, every group would be at 0%); the others need a value.
    """
    groups: dict[GroupKey, list[ModelRecord]] = defaultdict(list)
    for record in records:
        groups[record.group].append(record)
    found: dict[Key, Value] = {}
    for group, members in groups.items():
        stats = aggregates.group_stats(members)
        passing = [r for r in members if r.passes_accuracy]
        if any(r.speedup is not None for r in members):
            found[(*group, "pass_rate")] = Value(stats.pass_rate, stats.total_count)
        counts = {
            "geomean_speedup": sum((r.speedup or 0.0) > 0.0 for r in passing),
            "mean_compile_time_s": sum(bool(r.compilation_latency) for r in passing),
            "mean_compression_ratio": sum(bool(r.compression_ratio) for r in passing),
        }
        for stat, count in counts.items():
            if (value := getattr(stats, stat)) is not None:
                found[(*group, stat)] = Value(value, count)
    return found


def base_values(
    new: Sequence[ModelRecord], base: Sequence[ModelRecord]
) -> dict[Key, tuple[float, float]]:
    """``(base, new)`` of each aggregate over the models passing in both runs, per group.

    HUD's "common models only" keeps the models present in both; here they must pass in
    both too: a model that fails in one run leaves that run's means but not the other's, so
    one transient failure of a fast model would look like a speedup drop (the pass rate and
    the model's failure finding tell that story).
    """
    passing = {(r.group, r.model) for r in new if r.passes} & {
        (r.group, r.model) for r in base if r.passes
    }
    new_values = stat_values([r for r in new if (r.group, r.model) in passing])
    old_values = stat_values([r for r in base if (r.group, r.model) in passing])
    return {k: (old_values[k].value, v.value) for k, v in new_values.items() if k in old_values}


def worse(stat: str, rel_change: float | None) -> bool:
    """Whether a change of an aggregate is for the worse."""
    return direction(rel_change, STATS[stat]) == "worse"


def recovered(finding: AggregateFinding, value: float, points_since: int) -> bool:
    """Whether the aggregate is back, ``points_since`` points after the first bad one.

    A pass rate when it is back at the dashboard's 90%; any other finding when the value is
    back past the middle of its drop (``before`` to ``after``): the same threshold as the
    rule's would end a finding opened by one noisy base run at the next run, with the
    aggregate as low as it was. A step only once the detector could have found it.
    """
    if finding.rule == "pass_rate_below":
        return value >= PASS_RATE_FLOOR
    middle = (finding.before + finding.after) / 2
    back = value >= middle if STATS[finding.stat] else value <= middle
    return back and (finding.rule != "step" or points_since >= MIN_SEGMENT - 1)


@dataclass(frozen=True)
class AggregateMove:
    """A worse aggregate: by which rule, from what to what, between which runs."""

    rule: str
    before: float
    after: float
    last_good_run_id: int
    first_bad_run_id: int

    @property
    def rel_change(self) -> float:
        """``comparison.relative_change`` of the move, which the rules make only from a base."""
        rel = relative_change(self.after, self.before)
        assert rel is not None, "the rules and the detector judge no move from a zero base"
        return rel


def rule_verdicts(
    stat: str,
    history: Sequence[tuple[int, float]],
    base: tuple[float, float] | None,
    models: int,
) -> list[AggregateMove]:
    """The dashboard rules at the newest point of an aggregate's history (oldest first).

    ``base``: ``(base, new)`` over the models passing in the newest run and the one before.
    ``models``: the newest point's model count. A pass rate that fell under 90% by one model
    only is told at the next run if it is still under (the first bad run stays the first):
    a group just above 90% crosses it at every transient failure of any of its models.
    """
    if len(history) < 2:
        return []
    (last_good, previous), (first_bad, value) = history[-2], history[-1]
    fell = value < PASS_RATE_FLOOR <= previous
    if stat == "pass_rate" and fell and (previous - value) * models >= 1.5:
        return [AggregateMove("pass_rate_below", previous, value, last_good, first_bad)]
    if stat == "pass_rate" and len(history) > 2 and value < PASS_RATE_FLOOR:
        (last_good, earlier), (first_bad, dropped) = history[-3], history[-2]
        if dropped < PASS_RATE_FLOOR <= earlier and (earlier - dropped) * models < 1.5:
            return [AggregateMove("pass_rate_below", earlier, dropped, last_good, first_bad)]
    # A zero base has no relative change (comparison's rule): no fraction of it is told.
    if stat in BASE_RULES and base is not None and base[0] != 0:
        rule, fraction = BASE_RULES[stat]
        if base[1] < fraction * base[0]:
            return [AggregateMove(rule, base[0], base[1], last_good, first_bad)]
    return []


def step_verdicts(
    stat: str, history: Sequence[tuple[int, float]]
) -> list[tuple[int, AggregateMove]]:
    """Steps for the worse in an aggregate's history, with the position of each first bad point."""
    values = np.array([value for _, value in history], dtype=np.float64)
    return [
        (
            change.index,
            AggregateMove(
                "step",
                change.before,
                change.after,
                history[change.index - 1][0],
                history[change.index][0],
            ),
        )
        for change in find_change_points(values, DETECTOR)
        if worse(stat, change.rel_change) and abs(change.rel_change) >= MIN_STEP
    ]


@dataclass
class AggregateChanges:
    """What judging aggregates found: findings opened (not in the session yet), and ended."""

    opened: list[AggregateFinding] = field(default_factory=list)
    resolved: list[AggregateFinding] = field(default_factory=list)


def judge_series(
    key: Key,
    history: Sequence[tuple[int, float]],
    base: tuple[float, float] | None,
    known: list[AggregateFinding],
    judged: AggregateChanges,
    *,
    models: int,
    machine_id: int,
    channel: str,
    steps: bool = True,
) -> None:
    """Judge the newest point of one aggregate's history (pure: no I/O).

    Args:
        key: the aggregate.
        history: ``(run id, value)`` oldest first, the run judged last.
        base: ``(base, new)`` over the models common to the run and the one before.
        known: the aggregate's findings on the machine and channel whose first bad run is
            not later than the run judged; a new one is appended, so that a walk through a
            history sees its own findings.
        judged: where the opened and resolved findings go.
        models: the models behind the newest point (``Value.model_count``).
        machine_id: the run's machine.
        channel: the run's channel.
        steps: run the change-point detector too (a rescan runs it once over the whole
            history instead).
    """
    run_id, value = history[-1]
    position = {r: i for i, (r, _) in enumerate(history)}
    now = len(history) - 1
    for finding in known:
        since = now - position.get(finding.first_bad_run_id, -len(history))
        if finding.resolved_run_id is None and since > 0 and recovered(finding, value, since):
            finding.resolved_run_id = run_id
            judged.resolved.append(finding)
    for verdict in rule_verdicts(key[4], history, base, models):
        if not any(
            f.rule == verdict.rule
            and (f.first_bad_run_id == verdict.first_bad_run_id or f.resolved_run_id is None)
            for f in known
        ):
            _open(key, verdict, known, judged, machine_id, channel)
    if steps:
        for index, verdict in step_verdicts(key[4], history):
            if _unrecorded_step(index, known, position):
                finding = _open(key, verdict, known, judged, machine_id, channel)
                if recovered(finding, value, now - index):
                    finding.resolved_run_id = run_id


def _unrecorded_step(
    index: int, known: Sequence[AggregateFinding], position: dict[int, int]
) -> bool:
    """No finding of the aggregate (any rule) within the detector's radius of the step."""
    for finding in known:
        at = position.get(finding.first_bad_run_id)
        if at is not None and abs(at - index) <= REFINE_RADIUS:
            return False
    return True


def _open(
    key: Key,
    verdict: AggregateMove,
    known: list[AggregateFinding],
    judged: AggregateChanges,
    machine_id: int,
    channel: str,
) -> AggregateFinding:
    suite, config, precision, mode, stat = key
    finding = AggregateFinding(
        machine_id=machine_id,
        channel=channel,
        suite=suite,
        config=config,
        precision=precision,
        mode=mode,
        stat=stat,
        rule=verdict.rule,
        before=verdict.before,
        after=verdict.after,
        rel_change=verdict.rel_change,
        last_good_run_id=verdict.last_good_run_id,
        first_bad_run_id=verdict.first_bad_run_id,
        resolved_run_id=None,
        explained_by={"regressions": [], "failures": []},
        status="new",
    )
    known.append(finding)
    judged.opened.append(finding)
    return finding


def rescan_steps(
    key: Key,
    history: Sequence[tuple[int, float]],
    known: list[AggregateFinding],
    judged: AggregateChanges,
    *,
    machine_id: int,
    channel: str,
) -> None:
    """Steps over an aggregate's whole history (pure), each resolved where it recovered."""
    position = {r: i for i, (r, _) in enumerate(history)}
    for index, verdict in step_verdicts(key[4], history):
        if not _unrecorded_step(index, known, position):
            continue
        finding = _open(key, verdict, known, judged, machine_id, channel)
        finding.resolved_run_id = next(
            (r for p, (r, v) in enumerate(history) if recovered(finding, v, p - index)), None
        )


@dataclass(frozen=True)
class Candidate:
    """A per-model finding that may explain an aggregate one."""

    kind: str  # regressions | failures
    id: int
    group_id: int
    group: GroupKey
    metric: str  # the regression's ("" for a failure)
    started_at: datetime  # of its first bad (failing) run


def explains(
    finding: AggregateFinding, started_at: datetime, candidate: Candidate, window: timedelta
) -> bool:
    """Whether a per-model finding explains an aggregate one (pure).

    Same group of models, in the same alert group or first bad within ``window`` of it, and
    a failure, or a regression of a metric behind the aggregate.
    """
    key = (finding.suite, finding.config, finding.precision, finding.mode)
    near = candidate.group_id == finding.group_id or (
        abs(candidate.started_at - started_at) <= window
    )
    relevant = candidate.kind == "failures" or candidate.metric in EXPLAINING_METRICS[finding.stat]
    return candidate.group == key and near and relevant
