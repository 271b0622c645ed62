"""The noise-unit corpus: steps sized in noise units, levels of chosen lengths, close steps.

``bench/corpus.py``'s series draw a step's size as a share of the level, so how hard a step is
depends on the series' noise by chance. Here a step's size is drawn in *noise units* (the
standard deviation of the series' point-to-point noise) and every level's length is drawn
from a bucket, so recall can be read by both at once. Series ``i`` of seed ``s`` comes from
``numpy.random.default_rng([s, 7, i])`` alone (``make_unit_series``).

Categories:

- ``step`` (45%): one to three steps; each level after the first lasts 10-60 points (a
  bucket of 10-20, 20-30 or 30-60 picked uniformly, then uniformly within it), the first
  20-60. Each step is 1-10 noise units, up or down: a bucket of 1-2, 2-3, 3-5 or 5-10 picked
  uniformly, then uniformly within it.
- ``close`` (15%): two or three steps of 4-15 noise units with the levels between them 5-20
  points long (point 1 of issue 30: a step soon after a step), the first level 20-40 points,
  the last 5-40.
- ``no_change`` (16%), ``outliers`` (8%: 1-4 isolated points 5-10 noise units off),
  ``drift`` (8%: a linear trend of 2-6% of the level over the series, as in
  ``bench/corpus.py``: a slow warming, a dependency creeping), ``mixture`` (8%: points
  on one of two levels 3-6% apart, the upper one's share fixed per series): no step.

Noise is multiplicative with a coefficient of variation ``cv`` log-uniform in 0.5-5%, and one
of four families, each scaled to unit variance: ``gauss``; ``t3`` (Student-t, 3 degrees of
freedom: heavy tails); ``skew`` (log-normal with shape 0.5: the long right tail of latencies);
``bimodal`` (two modes 2.5 standard deviations of the mode apart, the upper one drawn with
probability 0.3: a kernel the autotuner sometimes picks). The noise unit of a step is ``cv``
times the level before it.
"""

import math

import numpy as np

from bench.corpus import T_DF, Array, Series, log_uniform

UNIT_CATEGORIES = ("step", "close", "no_change", "outliers", "drift", "mixture")
UNIT_CATEGORY_P = (0.45, 0.15, 0.16, 0.08, 0.08, 0.08)
NOISE_FAMILIES = ("gauss", "t3", "skew", "bimodal")
UNIT_BUCKETS = ((1.0, 2.0), (2.0, 3.0), (3.0, 5.0), (5.0, 10.0), (10.0, 15.0))
LEVEL_BUCKETS = ((10, 20), (20, 30), (30, 60))
SIDE_BUCKETS = ((5, 10), (10, 20), (20, 30), (30, 61))  # the shorter level either side of a step
CLOSE_SIZES = (4.0, 15.0)


SKEW_SHAPE = 0.5  # the log-normal's shape
SKEW_MEAN = math.exp(SKEW_SHAPE**2 / 2)
SKEW_SD = math.sqrt((math.exp(SKEW_SHAPE**2) - 1) * math.exp(SKEW_SHAPE**2))
UPPER_P, MODE_GAP = 0.3, 2.5  # the upper mode's share, and its distance in a mode's sd
BIMODAL_SD = math.sqrt(1 + MODE_GAP**2 * UPPER_P * (1 - UPPER_P))
IMPOSSIBLE = 1e6  # the cost of a value outside a family's support


def unit_noise(rng: np.random.Generator, family: str, n: int) -> Array:
    """Unit-variance, zero-mean noise of a family."""
    if family == "gauss":
        e = rng.standard_normal(n)
    elif family == "t3":
        e = rng.standard_t(T_DF, n) / math.sqrt(T_DF / (T_DF - 2))
    elif family == "skew":
        e = (np.exp(SKEW_SHAPE * rng.standard_normal(n)) - SKEW_MEAN) / SKEW_SD
    else:  # bimodal: two modes, the upper one drawn with probability UPPER_P
        raw = rng.standard_normal(n) + MODE_GAP * (rng.random(n) < UPPER_P)
        e = (raw - MODE_GAP * UPPER_P) / BIMODAL_SD
    return np.clip(e, -8.0, 8.0)


def noise_cost(family: str, e: Array) -> Array:
    """Each unit noise value's negative log-likelihood under ``family``, up to one constant.

    What the oracle places a step by (``bench/detection.py``'s ``place_step``).
    """
    if family == "gauss":
        return e * e / 2
    if family == "t3":
        t = e * math.sqrt(T_DF / (T_DF - 2))  # back to Student-t units
        return (T_DF + 1) / 2 * np.log1p(t * t / T_DF)
    if family == "skew":
        raw = e * SKEW_SD + SKEW_MEAN  # the log-normal draw, positive where possible
        inside = raw > 0
        log_raw = np.log(np.where(inside, raw, 1.0))
        z = log_raw / SKEW_SHAPE
        return np.where(inside, z * z / 2 + log_raw, IMPOSSIBLE)  # + log_raw: the Jacobian
    raw = e * BIMODAL_SD + MODE_GAP * UPPER_P
    lower = math.log(1 - UPPER_P) - raw * raw / 2
    upper = math.log(UPPER_P) - (raw - MODE_GAP) ** 2 / 2
    return -np.logaddexp(lower, upper)


def _levels(rng: np.random.Generator, category: str) -> tuple[list[int], list[float]]:
    """Each level's length, and each step's signed size in noise units."""
    sign = lambda: float(rng.choice((-1.0, 1.0)))  # noqa: E731
    if category == "step":
        steps = int(rng.integers(1, 4))
        lengths = [int(rng.integers(20, 61))]
        for _ in range(steps):
            low, high = LEVEL_BUCKETS[int(rng.integers(len(LEVEL_BUCKETS)))]
            lengths.append(int(rng.integers(low, high + 1)))
        sizes = []
        for _ in range(steps):
            low, high = UNIT_BUCKETS[int(rng.integers(4))]
            sizes.append(sign() * float(rng.uniform(low, high)))
        return lengths, sizes
    if category == "close":
        steps = int(rng.integers(2, 4))
        inner = [int(rng.integers(5, 21)) for _ in range(steps - 1)]
        lengths = [int(rng.integers(20, 41)), *inner, int(rng.integers(5, 41))]
        return lengths, [sign() * float(rng.uniform(*CLOSE_SIZES)) for _ in range(steps)]
    return [int(rng.integers(60, 241))], []


def make_unit_series(seed: int, index: int) -> Series:
    """Series ``index`` of the noise-unit corpus of ``seed``."""
    rng = np.random.default_rng([seed, 7, index])
    category = str(rng.choice(UNIT_CATEGORIES, p=UNIT_CATEGORY_P))
    family = str(rng.choice(NOISE_FAMILIES))
    cv = log_uniform(rng, 0.005, 0.05)
    lengths, units = _levels(rng, category)
    n = sum(lengths)
    level = np.full(n, log_uniform(rng, 0.1, 1000.0))
    steps: list[int] = []
    sizes: list[float] = []
    at = 0
    for length, unit in zip(lengths, [*units, None], strict=True):
        at += length
        if unit is None:
            break
        relative = unit * cv
        if relative <= -0.9:  # a fall to under a tenth of the level is not noise-sized
            relative = -0.9
        steps.append(at)
        sizes.append(relative)
        level[at:] *= 1.0 + relative
    if category == "drift":
        trend = rng.uniform(0.02, 0.06) * float(rng.choice((-1.0, 1.0)))
        level *= 1.0 + trend * np.linspace(0, 1, n)
    elif category == "mixture":
        level *= 1.0 + rng.uniform(0.03, 0.06) * (rng.random(n) < rng.uniform(0.2, 0.5))
    values = level * (1.0 + cv * unit_noise(rng, family, n))
    if category == "outliers":
        for spot in rng.choice(np.arange(1, n - 1, 3), int(rng.integers(1, 5)), replace=False):
            values[spot] = level[spot] * (1.0 + rng.choice((-1.0, 1.0)) * rng.uniform(5, 10) * cv)
    return Series(seed, index, category, family, cv, values, level, tuple(steps), tuple(sizes))


def make_unit_corpus(seed: int, count: int) -> list[Series]:
    """Series 0..count-1 of the noise-unit corpus of ``seed``."""
    return [make_unit_series(seed, i) for i in range(count)]


def step_units(series: Series, k: int) -> float:
    """Step ``k``'s size in noise units (unsigned)."""
    return abs(series.sizes[k]) / series.cv


def shorter_side(series: Series, k: int) -> int:
    """The points of the shorter level either side of step ``k``."""
    bounds = [0, *series.steps, len(series.values)]
    return min(bounds[k + 1] - bounds[k], bounds[k + 2] - bounds[k + 1])


def close_steps_series(seed: int) -> Series:
    """Issue 30's nightlies: 25 at one level, +15% for 6, +15% again for 14; 1% noise."""
    rng = np.random.default_rng([seed, 30])
    lengths, step = (25, 6, 14), 0.15
    level = np.concatenate([np.full(n, 100.0 * (1 + step) ** k) for k, n in enumerate(lengths)])
    cv = 0.01
    values = level * (1.0 + cv * rng.standard_normal(len(level)))
    steps = (lengths[0], lengths[0] + lengths[1])
    return Series(seed, 0, "close", "gauss", cv, values, level, steps, (step, step))
