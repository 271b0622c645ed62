"""A localization of one config against another: which settings make a case slower under one.

On one run, a case (a benchmark: suite, model, category, mode, precision, batch size, params)
measured slower under one compile config than under another ("on run 41, resnet50 under
``max_autotune`` is 20% slower than under ``default``") is no change between runs: the
environment is the same, and what differs is how each config compiled. Its localization
(``finding_kind`` ``configs``, ``finding_id`` the slow benchmark's id, both run columns the
run) compares the two configs' compiler settings: the last good side is the fast config, the
first bad the slow one, each the run's environment with, as its ``compiler_options``, what that
config's latency row recorded it compiled under (``extra.compiler_settings``: the variables, the
changed config values, the config's own Inductor options), over the run's own. The worker adds
each config's own options and mode (``workers.config_bisect``), skips the component isolation
(nothing else differs), and delta-debugs the differing settings after a pre-flight that
measures the case under both sides' settings.

Only a built-in case of a worker's run (its tier's harness compiles it again, under any mix of
the settings, ``workers.case_probe``), and configs that ``torch.compile`` compiles with a mode,
Inductor options or ``dynamic`` alone (``SETTABLE_CONFIGS``): those are settings a probe can
apply. The case's ``against`` names the fast benchmark and its config. It has no alert group:
no notice tells of it.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.benchmarks.comparison import judge_values, threshold_for
from app.benchmarks.models import Benchmark, Metric, Series
from app.core.errors import InvalidInput, NotFound
from app.localization.models import UNFINISHED, Localization
from app.localization.service import (
    CONFIGS,
    SETTINGS,
    NotMeasurable,
    builtin_tier,
    check_budget,
    components,
    environment_diff,
    queue_localization,
)
from app.runs.models import INVALID, Result, Run
from app.tokens.models import ApiToken
from app.tokens.service import check_project

METRIC = "latency"
# The case's key naming the fast side: {"benchmark_id": ..., "config": ...}.
AGAINST = "against"
# Configs torch.compile compiles with a mode, Inductor options or dynamic=True and nothing
# else (workers.compile_configs): a probe can express each as compiler settings. Not eager
# (no compilation), export and aot_inductor (another compiler path).
SETTABLE_CONFIGS = (
    "default",
    "cudagraphs",
    "dynamic",
    "max_autotune",
    "max_autotune_no_cudagraphs",
    "cpp_wrapper",
    "freezing",
)
# What makes two benchmarks one case under two configs.
SAME_CASE = ("suite", "model", "category", "mode", "precision", "batch_size", "params")
FIELDS = {"slow": "slow_benchmark_id", "fast": "fast_benchmark_id"}


def is_configs_case(case: Mapping[str, Any]) -> bool:
    """Whether a localization's case compares two configs (it names the fast one)."""
    return isinstance(case.get(AGAINST), Mapping)


def _refused(
    loc: str, message: str, status: type[InvalidInput | NotFound] = InvalidInput
) -> InvalidInput | NotFound:
    """The error of a request whose field ``loc`` is at fault (422, or 404 for an unknown id)."""
    return status(message, errors=[{"loc": loc, "field": loc, "message": message}])


@dataclass(frozen=True)
class Side:
    """One config's side: its benchmark, its latency on the run, the settings it recorded."""

    benchmark: Benchmark
    value: float
    settings: dict[str, Any]


@dataclass(frozen=True)
class ConfigsTarget:
    """What a configs localization measures: one case under two configs on one run."""

    run: Run
    metric: Metric
    slow: Side
    fast: Side
    rel_change: float

    @property
    def machine(self) -> str:
        """The run's machine, where the case is measured again."""
        return self.run.machine.name

    def case(self) -> dict[str, Any]:
        """The localization's case: the slow benchmark's, its tier, the fast one ``against``.

        Raises:
            NotMeasurable: the run is not a benchwatch worker's in a built-in tier.
        """
        tier = builtin_tier(self.run)
        if tier is None:
            raise NotMeasurable(
                f"a configs localization measures a built-in case of a benchwatch worker's "
                f"run: run {self.run.id} comes from {self.run.source or 'uploads'}"
                + (f" in tier {self.run.tier}" if self.run.tier else "")
            )
        slow, fast = self.slow.benchmark, self.fast.benchmark
        return {
            **slow.identity(),
            "params": slow.params or {},
            "tier": tier,
            "channel": self.run.channel,
            "metric": self.metric.name,
            "unit": self.metric.unit,
            "higher_is_better": self.metric.higher_is_better,
            "before": self.fast.value,
            "after": self.slow.value,
            "rel_change": self.rel_change,
            "device": self.run.machine.device,
            AGAINST: {"benchmark_id": fast.id, "config": fast.config},
        }

    def environments(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The fast (last good) and slow (first bad) sides: the run's, each config's settings."""
        recorded = components(self.run.environment)
        return (
            {**recorded, SETTINGS: self.fast.settings},
            {**recorded, SETTINGS: self.slow.settings},
        )


def configs_target(
    session: Session,
    run_id: int,
    slow_id: int,
    fast_id: int,
    token: ApiToken | None = None,
) -> ConfigsTarget:
    """The run and the case's two benchmarks, checked (4xx naming the field at fault).

    404 for a run or benchmark that does not exist; 403 for a run of a project the token may
    not ask for; 422 where the two are not one case under two configs this can compare, the
    run has no latency of one of them, or the slow one is not slower by the comparison rule.
    """
    run = session.get(Run, run_id)
    if run is None:
        raise _refused("run_id", f"run {run_id} not found", NotFound)
    found = {}
    for side, number in (("slow", slow_id), ("fast", fast_id)):
        benchmark = session.get(Benchmark, number)
        if benchmark is None:
            raise _refused(FIELDS[side], f"benchmark {number} not found", NotFound)
        found[side] = benchmark
    if token is not None:
        check_project(token, run.project, "run_id")
    if run.status == INVALID:
        raise _refused("run_id", f"run {run.id} was invalidated: its results are out of history")
    slow, fast = found["slow"], found["fast"]
    _same_case(slow, fast)
    metric = session.scalar(select(Metric).where(Metric.name == METRIC))
    results = _latencies(session, run, (slow.id, fast.id))
    sides = {
        side: _side(run, benchmark, results.get(benchmark.id), FIELDS[side])
        for side, benchmark in found.items()
    }
    assert metric is not None  # a latency result was found, so its metric exists
    verdict = judge_values(sides["fast"].value, sides["slow"].value, metric.higher_is_better)
    if verdict.verdict != "worse" or verdict.rel_change is None:
        change = f" ({verdict.rel_change:+.1%})" if verdict.rel_change is not None else ""
        raise _refused(
            FIELDS["slow"],
            f"benchmark {slow.id} ({slow.config}) is not slower than benchmark {fast.id} "
            f"({fast.config}) on run {run.id}: {METRIC} {sides['slow'].value:.6g} against "
            f"{sides['fast'].value:.6g} {metric.unit}{change}, within "
            f"{threshold_for():.0%} or the other way",
        )
    return ConfigsTarget(run, metric, sides["slow"], sides["fast"], verdict.rel_change)


def _same_case(slow: Benchmark, fast: Benchmark) -> None:
    if slow.id == fast.id:
        raise _refused(
            FIELDS["fast"], "the slow benchmark itself: give the same case under another config"
        )
    for name in SAME_CASE:
        theirs, ours = getattr(fast, name), getattr(slow, name)
        if (theirs or None) != (ours or None):
            raise _refused(
                FIELDS["fast"],
                f"benchmark {fast.id}'s {name} {theirs!r} is not benchmark {slow.id}'s "
                f"{ours!r}: a configs localization compares one case under two configs",
            )
    for side, benchmark in (("slow", slow), ("fast", fast)):
        if benchmark.config not in SETTABLE_CONFIGS:
            raise _refused(
                FIELDS[side],
                f"benchmark {benchmark.id}'s config {benchmark.config} is not compiled by "
                "torch.compile with a mode or Inductor options alone: a probe compares "
                f"configs by their settings ({', '.join(SETTABLE_CONFIGS)})",
            )


def _latencies(session: Session, run: Run, benchmark_ids: tuple[int, int]) -> dict[int, Result]:
    """The run's latency result of each of these benchmarks, by benchmark id."""
    rows = session.execute(
        select(Series.benchmark_id, Result)
        .join(Series, Series.id == Result.series_id)
        .join(Metric, Metric.id == Series.metric_id)
        .where(
            Result.run_id == run.id,
            Series.benchmark_id.in_(benchmark_ids),
            Metric.name == METRIC,
        )
    )
    return {row[0]: row[1] for row in rows}


def _side(run: Run, benchmark: Benchmark, result: Result | None, loc: str) -> Side:
    """A config's side; 422 at ``loc`` where the run has no latency of it to compare."""
    if result is None:
        raise _refused(loc, f"run {run.id} has no {METRIC} result of benchmark {benchmark.id}")
    if result.status != "ok" or result.value is None:
        why = f": {result.reason}" if result.reason else ""
        raise _refused(
            loc, f"benchmark {benchmark.id}'s {METRIC} on run {run.id} is {result.status}{why}"
        )
    recorded = (result.extra or {}).get("compiler_settings")
    settings = dict(run.environment.compiler_options or {})
    settings |= dict(recorded) if isinstance(recorded, Mapping) else {}
    return Side(benchmark, result.value, settings)


def request_configs_localization(
    session: Session,
    run_id: int,
    slow_id: int,
    fast_id: int,
    *,
    started_by: str,
    budget: int,
    token: ApiToken | None = None,
) -> tuple[Localization, bool]:
    """The pair's unfinished localization, or a new one queued; and whether it is new.

    Refused as ``configs_target`` says, 409 where no worker measures the case or the machine
    spent its budget.
    """
    target = configs_target(session, run_id, slow_id, fast_id, token)
    candidates = session.scalars(
        select(Localization)
        .where(
            Localization.finding_kind == CONFIGS,
            Localization.finding_id == slow_id,
            Localization.bad_run_id == run_id,
            Localization.state.in_(UNFINISHED),
        )
        .order_by(Localization.id)
    )
    for unfinished in candidates:
        if (unfinished.case or {}).get(AGAINST, {}).get("benchmark_id") == fast_id:
            return unfinished, False
    case = target.case()
    check_budget(session, target.machine, budget)
    good, bad = target.environments()
    diff = {"config": [target.fast.benchmark.config, target.slow.benchmark.config]}
    diff |= environment_diff(good[SETTINGS], bad[SETTINGS])
    localization = Localization(
        finding_kind=CONFIGS,
        finding_id=slow_id,
        machine=target.machine,
        project=target.run.project,
        good_run_id=run_id,
        bad_run_id=run_id,
        case=case,
        good_environment=good,
        bad_environment=bad,
        started_by=started_by,
        answer={"environment_diff": diff},
    )
    return queue_localization(session, localization, target.run), True
