"""Better or worse: relative change, direction, verdict and geomeans, for every reader.

``GET /api/v1/compare``, the dashboard's pages and anomaly detection all decide here, so a
page and the API cannot disagree on a case. The thresholds are PyTorch's TorchInductor
dashboard's: a relative change within 5% is no move (20% for memory, which is noisier).

A metric's direction comes from the catalog (``Metric.higher_is_better``; None: neither way
is better). Rows are result rows as ``runs.reads.list_run_results`` returns them.
"""

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from app.benchmarks.service import BenchmarkKey
from app.benchmarks.vocabulary import PASSING_ACCURACY

RELATIVE = 0.05
RELATIVE_MEMORY = 0.20

Direction = Literal["better", "worse"]
CaseVerdict = Literal[
    "better",  # moved beyond the threshold the good way
    "worse",
    "unchanged",  # within the threshold (or equal where no relative change exists)
    "changed",  # moved, but the metric has no good direction (or the base is zero)
    "new",  # only the new side measured it
    "missing",  # only the base measured it
    "now_passes",  # failed (or failed accuracy) on the base, passes on the new side
    "now_fails",
    "failing",  # failed on both sides
]
CaseKey = tuple[BenchmarkKey, str]  # a benchmark and a metric: one row of a comparison


def relative_change(new: float | None, base: float | None) -> float | None:
    """``(new - base) / |base|``; None when either is missing or the base is zero."""
    if new is None or base is None or base == 0:
        return None
    return (new - base) / abs(base)


def direction(rel_change: float | None, higher_is_better: bool | None) -> Direction | None:
    """Which way a change goes for its metric, however small.

    Args:
        rel_change: the relative change (see ``relative_change``).
        higher_is_better: the metric's direction; None when neither way is better.

    Returns:
        ``better`` or ``worse``; None for no change, an unknown one or a metric without a
        direction.
    """
    if rel_change is None or rel_change == 0 or higher_is_better is None:
        return None
    return "better" if (rel_change > 0) == higher_is_better else "worse"


def direction_between(base: float, new: float, higher_is_better: bool | None) -> Direction | None:
    """Which way a move from ``base`` to ``new`` goes, from a zero base too.

    A zero base has no relative change, yet 0 -> 2 graph breaks is a move with a way: the
    difference has the relative change's sign wherever both exist.
    """
    return direction(new - base, higher_is_better)


def threshold_for(memory: bool = False) -> float:
    """The relative change that counts as a move: 5%, or 20% for memory."""
    return RELATIVE_MEMORY if memory else RELATIVE


@dataclass(frozen=True)
class Measurement:
    """One side's result of a case: its status, number and text (accuracy's is a word)."""

    status: str
    value: float | None
    text: str | None = None

    @classmethod
    def of_row(cls, row: Mapping[str, Any] | None) -> "Measurement | None":
        """The measurement of a result row (None for no row: the side did not run the case)."""
        return None if row is None else cls(row["status"], row["value"], row["text_value"])


@dataclass(frozen=True)
class Change:
    """How a case moved from the base to the new side."""

    rel_change: float | None
    verdict: CaseVerdict


def judge(
    base: Measurement | None,
    new: Measurement | None,
    higher_is_better: bool | None,
    threshold: float = RELATIVE,
    *,
    accuracy: bool = False,
) -> Change:
    """The verdict on one case, base against new.

    Args:
        base: the base side's measurement; None when it did not run the case.
        new: the new side's measurement; None when it did not run the case.
        higher_is_better: the metric's direction; None when neither way is better.
        threshold: the relative change within which a case is ``unchanged``.
        accuracy: the metric is accuracy, whose text says whether the case passes.

    Returns:
        The relative change (None where statuses differ or no number divides) and the verdict.
    """
    if base is None:
        return Change(None, "new")
    if new is None:
        return Change(None, "missing")
    base_ok, new_ok = base.status == "ok", new.status == "ok"
    if base_ok != new_ok:
        return Change(None, "now_passes" if new_ok else "now_fails")
    if not new_ok:
        return Change(None, "failing")
    if accuracy and base.text != new.text:
        now_passing = new.text in PASSING_ACCURACY
        if now_passing != (base.text in PASSING_ACCURACY):
            return Change(None, "now_passes" if now_passing else "now_fails")
    rel = relative_change(new.value, base.value)
    if rel is None:
        same = (base.value, base.text) == (new.value, new.text)
        return Change(None, "unchanged" if same else "changed")
    if abs(rel) <= threshold:
        return Change(rel, "unchanged")
    return Change(rel, direction(rel, higher_is_better) or "changed")


def judge_values(
    base: float | None,
    new: float | None,
    higher_is_better: bool | None,
    threshold: float = RELATIVE,
) -> Change:
    """The verdict on two numbers both sides measured (an aggregate, say)."""
    return judge(Measurement("ok", base), Measurement("ok", new), higher_is_better, threshold)


def judge_rows(
    base: Mapping[str, Any] | None, new: Mapping[str, Any] | None, threshold: float = RELATIVE
) -> Change:
    """The verdict on one case from its result rows (at least one of them present)."""
    ident = new if new is not None else base
    assert ident is not None, "a case is in at least one of the runs"
    return judge(
        Measurement.of_row(base),
        Measurement.of_row(new),
        ident["higher_is_better"],
        threshold,
        accuracy=ident["metric"] == "accuracy",
    )


def case_key(row: Mapping[str, Any], *, config: bool = True) -> CaseKey:
    """The row a result belongs to in a comparison.

    Args:
        row: a result row.
        config: False when each side fixes its own config (config against config): the
            config is then not part of what identifies the case.

    Returns:
        The benchmark (batch size and params included) and the metric.
    """
    key = BenchmarkKey.of_row(row)
    return (key if config else key._replace(config=""), row["metric"])


def in_order(keys: Iterable[CaseKey]) -> list[CaseKey]:
    """Cases in the order a comparison lists them (a batch size may be None: compare text)."""
    return sorted(keys, key=str)


def geomean(values: Iterable[float]) -> float | None:
    """Geometric mean of positive values, no clipping (None for no values)."""
    kept = list(values)
    if not kept:
        return None
    return math.exp(sum(math.log(v) for v in kept) / len(kept))


@dataclass(frozen=True)
class Geomean:
    """The geomean of new / base over the cases both sides measured with a positive value."""

    ratio: float | None
    count: int
    direction: Direction | None  # of the ratio, no threshold (None: no ratio, or 1)


def geomean_ratio(
    pairs: Iterable[tuple[float | None, float | None]], higher_is_better: bool | None
) -> Geomean:
    """Geomean of ``new / base`` over ``(base, new)`` pairs where both are positive."""
    ratios = [n / b for b, n in pairs if b is not None and n is not None and b > 0 and n > 0]
    ratio = geomean(ratios)
    rel = None if ratio is None else ratio - 1
    return Geomean(ratio, len(ratios), direction(rel, higher_is_better))
