"""How sure each case of a comparison is: its samples on both sides, judged by the one rule.

The rule is ``comparison.judge_samples``; this reads what it judges. A side's samples of a
case are its result's (or its value, when it has none) and those its compare re-runs measured
again (``suite_runs.compare_reruns.folded``), which stay evidence beside the run.

What one comparison may read is bounded, since any reader may ask: the statistics cover at
most ``MAX_CASES`` cases, and a result whose stored samples exceed ``MAX_SAMPLE_BYTES`` is read
as its value alone (its case then says why).
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import Text, case, cast, func, select
from sqlalchemy.orm import Session

from app.benchmarks.comparison import Confidence, judge_samples
from app.core.sample_stats import geomean_interval
from app.runs.models import Result
from app.suite_runs import compare_reruns
from app.suite_runs.compare_reruns import CaseMetric, case_id

MAX_CASES = 300  # cases one comparison's statistics cover
MAX_SAMPLE_BYTES = 64 * 1024  # a result's stored samples read at most (about 5,000 numbers)


@dataclass(frozen=True)
class SideSamples:
    """One side's samples per case and metric, and which of them re-runs added to."""

    samples: dict[CaseMetric, list[float]]
    rerun: dict[CaseMetric, int]  # samples re-runs added, per case and metric
    too_many: set[CaseMetric]  # stored samples too large to read: the value stands alone


def key_of(row: Mapping[str, Any]) -> CaseMetric:
    """A result row's case and metric, as re-runs name them."""
    return case_id(row), row["metric"]


def read_side(session: Session, run_id: int, rows: Sequence[Mapping[str, Any]]) -> SideSamples:
    """The samples of ``rows`` (a run's result rows, ``compared_results``'s) and its re-runs'.

    One statement for the stored samples; rows that failed have none.
    """
    by_series = {row["series_id"]: row for row in rows if row["status"] == "ok"}
    stored = func.length(cast(Result.samples, Text))
    query = select(
        Result.series_id,
        case((stored <= MAX_SAMPLE_BYTES, Result.samples), else_=None).label("samples"),
        (stored > MAX_SAMPLE_BYTES).label("too_many"),
    ).where(Result.run_id == run_id, Result.series_id.in_(list(by_series)))
    samples: dict[CaseMetric, list[float]] = {}
    too_many: set[CaseMetric] = set()
    for series_id, found, over in session.execute(query) if by_series else []:
        row = by_series[series_id]
        key = key_of(row)
        if over:
            too_many.add(key)
        kept = found or ([] if row["value"] is None else [row["value"]])
        samples[key] = [float(v) for v in kept]
    units = {row["metric"]: row["unit"] for row in rows}
    rerun = compare_reruns.folded(session, run_id, units)
    for key, added in rerun.items():
        if key in samples:
            samples[key] = samples[key] + added
    return SideSamples(samples, {k: len(v) for k, v in rerun.items() if k in samples}, too_many)


def judge(
    base: SideSamples,
    new: SideSamples,
    pairs: Sequence[tuple[CaseMetric, CaseMetric, bool | None]],
    threshold: float,
) -> list[Confidence | None]:
    """Per pair of cases (base's, new's, the metric's direction): how sure its change is."""
    judged: list[Confidence | None] = []
    for base_key, new_key, higher_is_better in pairs:
        left, right = base.samples.get(base_key), new.samples.get(new_key)
        if left is None or right is None:
            judged.append(None)
            continue
        found = judge_samples(left, right, higher_is_better, threshold)
        if found is not None and (base_key in base.too_many or new_key in new.too_many):
            found = _too_many(found)
        judged.append(found)
    return judged


def _too_many(found: Confidence) -> Confidence:
    return replace(
        found,
        verdict="unsure",
        needs_more=False,
        reason=f"samples over {MAX_SAMPLE_BYTES // 1024} KiB are not read here: value alone",
    )


def geomean(
    base: SideSamples, new: SideSamples, pairs: Sequence[tuple[CaseMetric, CaseMetric, Any]]
) -> tuple[float, float] | None:
    """The geomean ratio's bootstrap interval over the pairs both sides have positive samples."""
    cases = [
        (left, right)
        for base_key, new_key, _ in pairs
        if (left := base.samples.get(base_key))
        and (right := new.samples.get(new_key))
        and min(left) > 0
        and min(right) > 0
    ]
    return geomean_interval(cases)
