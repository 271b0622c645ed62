"""How sure a difference between two sets of samples is: pure numpy and scipy, no domain.

- ``rank_p_value``: the two-sided Mann-Whitney U test (scipy's), 1 when every value is equal;
  ``least_p_value``: the smallest p-value that test can give for two sizes.
- ``cliffs_delta``: the effect size P(new > base) - P(new < base), from -1 to 1.
- ``median_ratio_interval`` and ``geomean_interval``: percentile bootstrap intervals of the
  ratio of medians (new over base) and of the geomean of such ratios over many cases.

The bootstrap draws from a generator seeded with a fixed value, so that a page and the API
read twice give the same interval.
"""

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
RESAMPLES = 1000
SEED = 20261206
LEVEL = 0.95


def _array(values: Sequence[float] | FloatArray) -> FloatArray:
    return np.asarray(values, dtype=np.float64)


def least_p_value(n: int, m: int) -> float:
    """The smallest two-sided p-value a rank test of ``n`` against ``m`` values can give."""
    return min(1.0, 2 / math.comb(n + m, n)) if n and m else 1.0


def rank_p_value(base: Sequence[float] | FloatArray, new: Sequence[float] | FloatArray) -> float:
    """The two-sided Mann-Whitney U test's p-value (1 when every value is the same)."""
    left, right = _array(base), _array(new)
    if len(left) == 0 or len(right) == 0 or np.ptp(np.concatenate([left, right])) == 0:
        return 1.0
    from scipy.stats import mannwhitneyu  # slow to import: only where samples are compared

    return float(mannwhitneyu(left, right, alternative="two-sided").pvalue)


def cliffs_delta(base: Sequence[float] | FloatArray, new: Sequence[float] | FloatArray) -> float:
    """P(a new value > a base value) - P(new < base), over every pair; 0 for an empty side.

    Counted with a sort and binary searches: ``n log m``, not every pair.
    """
    left, right = np.sort(_array(base)), _array(new)
    if len(left) == 0 or len(right) == 0:
        return 0.0
    below = np.searchsorted(left, right, side="left")  # base values under each new one
    above = len(left) - np.searchsorted(left, right, side="right")
    return float((below.sum() - above.sum()) / (len(left) * len(right)))


def _medians(values: FloatArray, rng: np.random.Generator, resamples: int) -> FloatArray:
    """The median of each of ``resamples`` draws (with replacement) of ``values``."""
    if len(values) == 1:
        return np.full(resamples, values[0])
    drawn = values[rng.integers(0, len(values), size=(resamples, len(values)))]
    return np.median(drawn, axis=1)


def _ratios(
    base: FloatArray, new: FloatArray, rng: np.random.Generator, resamples: int
) -> FloatArray:
    return _medians(new, rng, resamples) / _medians(base, rng, resamples)


def median_ratio_interval(
    base: Sequence[float] | FloatArray,
    new: Sequence[float] | FloatArray,
    level: float = LEVEL,
    resamples: int = RESAMPLES,
) -> tuple[float, float]:
    """The percentile bootstrap interval of ``median(new) / median(base)``.

    Each side is drawn with replacement from its own samples. Positive values only: a ratio
    of medians of times, throughputs or sizes.
    """
    left, right = _array(base), _array(new)
    if len(left) == 0 or len(right) == 0 or np.any(left <= 0) or np.any(right <= 0):
        raise ValueError("a ratio interval needs positive samples on both sides")
    ratios = _ratios(left, right, np.random.default_rng(SEED), resamples)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(ratios, [tail, 100 - tail])
    return float(low), float(high)


def geomean_interval(
    cases: Sequence[tuple[Sequence[float], Sequence[float]]],
    level: float = LEVEL,
    resamples: int = RESAMPLES,
) -> tuple[float, float] | None:
    """The percentile bootstrap interval of the geomean of the cases' median ratios.

    Each resample redraws every case's samples, so a case with one sample a side adds its
    fixed ratio and a noisy case widens the interval. None without a case.
    """
    if not cases:
        return None
    rng = np.random.default_rng(SEED)
    logs = np.zeros(resamples)
    for base, new in cases:
        logs += np.log(_ratios(_array(base), _array(new), rng, resamples))
    geomeans = np.exp(logs / len(cases))
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(geomeans, [tail, 100 - tail])
    return float(low), float(high)
