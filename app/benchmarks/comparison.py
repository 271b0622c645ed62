"""Better or worse: relative change, direction, verdict and geomeans, for every reader.

``GET /api/v1/compare``, the dashboard's pages and anomaly detection all decide here, so a
page and the API cannot disagree on a case. The thresholds are PyTorch's TorchInductor
dashboard's: a relative change within 5% is no move (20% for memory, which is noisier).

Where both sides have samples, ``judge_samples`` says how sure a change is: a bootstrap
interval of the ratio of medians, a rank test and an effect size (``Confidence``).

A metric's direction comes from the catalog (``Metric.higher_is_better``; None: neither way
is better). Rows are result rows as ``runs.reads.list_run_results`` returns them.
"""

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from app.benchmarks.service import BenchmarkKey
from app.benchmarks.vocabulary import PASSING_ACCURACY
from app.core.modes import two_modes
from app.core.sample_stats import cliffs_delta, least_p_value, median_ratio_interval, rank_p_value

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


# --- How sure: a case's samples on both sides (the compare's statistics) ---

Sureness = Literal["better", "worse", "same", "unsure", "changed"]
MAX_P = 0.05  # the rank test's level for a move
SMALL_EFFECT = 0.33  # Cliff's delta under this (in size) is a small effect, not a move
MIN_SAMPLES = 3  # samples a side needs before its interval means anything
MIN_MODE_SAMPLES = 20  # samples a side needs before two modes in them are more than chance


@dataclass(frozen=True)
class Confidence:
    """How sure a case's change is, from its samples (``judge_samples``).

    ``ratio``: median(new) / median(base), with its bootstrap ``interval``; ``p_value``: the
    rank test's; ``cliffs_delta``: the effect size; ``verdict``: ``better`` or ``worse`` (a
    move beyond the threshold the test and the effect agree on), ``same`` (the whole interval
    within the threshold), ``changed`` (a move of a metric with no better way), else
    ``unsure``; ``needs_more``: more samples could decide it; ``bimodal``: which sides hold
    two modes (``base``, ``new``).
    """

    ratio: float
    interval: tuple[float, float]
    p_value: float
    cliffs_delta: float
    verdict: Sureness
    needs_more: bool
    samples: tuple[int, int]
    bimodal: tuple[str, ...] = ()
    reason: str = ""


def judge_samples(
    base: Sequence[float],
    new: Sequence[float],
    higher_is_better: bool | None,
    threshold: float = RELATIVE,
) -> Confidence | None:
    """How sure the change from ``base`` to ``new`` samples is; None without positive samples.

    A move needs all of: the ratio beyond the threshold, the rank test at ``MAX_P``, the
    interval clear of no change, and an effect of at least ``SMALL_EFFECT``. ``same`` needs
    the whole interval within the threshold. Anything between is ``unsure``; where a side
    has fewer than ``MIN_SAMPLES`` or the rank test could not reach ``MAX_P`` with these
    sizes, the case needs more runs.
    """
    if not base or not new or min(base) <= 0 or min(new) <= 0:
        return None
    ratio = float(np.median(new)) / float(np.median(base))
    low, high = median_ratio_interval(base, new)
    p_value, delta = rank_p_value(base, new), cliffs_delta(base, new)
    bimodal = tuple(
        side
        for side, values in (("base", base), ("new", new))
        if len(values) >= MIN_MODE_SAMPLES and two_modes(values)
    )
    few = min(len(base), len(new)) < MIN_SAMPLES or least_p_value(len(base), len(new)) > MAX_P
    rel = ratio - 1
    sure = (
        abs(rel) > threshold
        and p_value <= MAX_P
        and (low > 1 or high < 1)
        and abs(delta) >= SMALL_EFFECT
        and not few
    )
    if sure:
        verdict: Sureness = direction(rel, higher_is_better) or "changed"
        reason = f"p = {p_value:.2g}, effect {delta:+.2f}, interval clear of no change"
    elif not few and 1 - threshold <= low and high <= 1 + threshold:
        verdict, reason = "same", f"the whole interval is within {threshold:.0%}"
    else:
        verdict = "unsure"
        reason = (
            f"{len(base)} and {len(new)} samples: too few to decide"
            if few
            else f"p = {p_value:.2g}, effect {delta:+.2f}, interval {low:.3f}-{high:.3f}"
        )
    needs_more = verdict == "unsure"
    samples = (len(base), len(new))
    return Confidence(
        ratio, (low, high), p_value, delta, verdict, needs_more, samples, bimodal, reason
    )
