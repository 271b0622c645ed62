"""What an alert group's steps span, counted in SQL: a page need not load every step."""

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.anomalies.models import Regression
from app.benchmarks.models import Benchmark, CompilerConfig, Metric, Series


@dataclass
class StepSummary:
    """A group's steps: how many per direction (first seen first), their statuses and spans."""

    counts: dict[str, int] = field(default_factory=dict)
    statuses: set[str] = field(default_factory=set)
    suites: set[str] = field(default_factory=set)
    configs: set[str] = field(default_factory=set)
    precisions: set[str] = field(default_factory=set)
    metrics: set[str] = field(default_factory=set)

    @property
    def total(self) -> int:
        """How many steps the group has."""
        return sum(self.counts.values())


def summary_of(steps: Iterable[Regression]) -> StepSummary:
    """The summary of steps already loaded, in id order."""
    summary = StepSummary()
    for step in steps:
        benchmark = step.series.benchmark
        summary.counts[step.direction] = summary.counts.get(step.direction, 0) + 1
        summary.statuses.add(step.status)
        summary.suites.add(benchmark.suite)
        summary.configs.add(benchmark.config)
        summary.precisions.add(benchmark.precision)
        summary.metrics.add(step.series.metric.name)
    return summary


def summarize(session: Session, group_ids: Collection[int]) -> dict[int, StepSummary]:
    """The summary of each group's steps, in one statement (a group without any: empty).

    The database hands over one row per distinct combination, not one per step.
    """
    summaries = {group_id: StepSummary() for group_id in group_ids}
    if not group_ids:
        return summaries
    keys = (
        Regression.group_id,
        Regression.direction,
        Regression.status,
        Benchmark.suite,
        CompilerConfig.name,
        Benchmark.precision,
        Metric.name,
    )
    query = (
        select(*keys, func.count(), func.min(Regression.id))
        .join(Series, Regression.series_id == Series.id)
        .join(Benchmark, Series.benchmark_id == Benchmark.id)
        .join(CompilerConfig, Benchmark.compiler_config_id == CompilerConfig.id)
        .join(Metric, Series.metric_id == Metric.id)
        .where(Regression.group_id.in_(list(group_ids)))
        .group_by(*keys)
    )
    first_seen: dict[tuple[int, str], int] = {}
    rows = session.execute(query).all()
    for group_id, direction, status, suite, config, precision, metric, count, first in rows:
        summary = summaries[group_id]
        summary.counts[direction] = summary.counts.get(direction, 0) + count
        key = (group_id, direction)
        first_seen[key] = min(first_seen.get(key, first), first)
        summary.statuses.add(status)
        summary.suites.add(suite)
        summary.configs.add(config)
        summary.precisions.add(precision)
        summary.metrics.add(metric)
    for group_id, summary in summaries.items():  # directions in the order their steps came
        order = sorted(summary.counts, key=lambda d: first_seen[(group_id, d)])
        summary.counts = {d: summary.counts[d] for d in order}
    return summaries


def largest_steps(
    session: Session, group_ids: Collection[int], limit: int
) -> dict[int, list[Regression]]:
    """Each group's ``limit`` largest steps (by size of change, then id), largest first."""
    shown: dict[int, list[Regression]] = {group_id: [] for group_id in group_ids}
    if not group_ids:
        return shown
    size = func.abs(Regression.rel_change)
    rank = (
        func.row_number()
        .over(partition_by=Regression.group_id, order_by=(size.desc(), Regression.id))
        .label("rank")
    )
    ranked = select(Regression.id, rank).where(Regression.group_id.in_(list(group_ids))).subquery()
    query = (
        select(Regression)
        .join(ranked, ranked.c.id == Regression.id)
        .where(ranked.c.rank <= limit)
        .order_by(Regression.group_id, ranked.c.rank)
    )
    for step in session.scalars(query):
        shown[step.group_id].append(step)
    return shown
