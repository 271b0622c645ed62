"""The seeded synthetic series corpus and the table printing of the detection benchmarks.

``bench/detection.py`` (whose docstring describes the corpus), ``bench/sooner.py`` and
``bench/gate.py`` read the same series: series ``i`` of seed ``s`` comes from
``numpy.random.default_rng([s, i])`` alone.
"""

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float64]

CATEGORIES = ("step", "no_change", "outliers", "bimodal", "drift")
CATEGORY_P = (0.45, 0.20, 0.12, 0.12, 0.11)
STEP_BUCKETS = ((0.02, 0.03), (0.03, 0.05), (0.05, 0.10), (0.10, 0.30))
NOISE_BUCKETS = ((0.005, 0.01), (0.01, 0.02), (0.02, 0.04), (0.04, 0.08))
MIN_LEVEL = 8  # points every level lasts, the first included
LENGTHS = (60, 400)
TOLERANCE = 2  # points between a detection and the true step it matches
T_DF = 3
NOISE_CLIP = 8.0


@dataclass(frozen=True)
class Series:
    """One labelled series: values and the truth about them."""

    seed: int
    index: int
    category: str
    noise: str  # "gauss" or "t3"
    cv: float
    values: Array
    level: Array  # the noise-free level under each point
    steps: tuple[int, ...] = ()  # first point of each new level
    sizes: tuple[float, ...] = ()  # signed relative change of each step


def log_uniform(rng: np.random.Generator, low: float, high: float) -> float:
    """A draw spread evenly over orders of magnitude."""
    return math.exp(rng.uniform(math.log(low), math.log(high)))


def noise(rng: np.random.Generator, kind: str, n: int) -> Array:
    """Unit-variance noise, Gaussian or scaled Student-t(3), clipped at +-8."""
    if kind == "gauss":
        e = rng.standard_normal(n)
    else:
        e = rng.standard_t(T_DF, n) / math.sqrt(T_DF / (T_DF - 2))
    return np.clip(e, -NOISE_CLIP, NOISE_CLIP)


def place_steps(rng: np.random.Generator, n: int, k: int) -> list[int]:
    """``k`` step indices such that every level lasts at least ``MIN_LEVEL`` points."""
    while True:
        at = sorted(int(i) for i in rng.choice(np.arange(MIN_LEVEL, n - MIN_LEVEL + 1), k, False))
        bounds = [0, *at, n]
        if all(b - a >= MIN_LEVEL for a, b in itertools.pairwise(bounds)):
            return at


def uniform_size(rng: np.random.Generator) -> float:
    """A step size drawn uniformly over the whole range."""
    return float(rng.uniform(STEP_BUCKETS[0][0], STEP_BUCKETS[-1][1]))


def bucketed_size(rng: np.random.Generator) -> float:
    """A step size: a bucket picked uniformly, then uniformly within it."""
    low, high = STEP_BUCKETS[int(rng.integers(len(STEP_BUCKETS)))]
    return float(rng.uniform(low, high))


STEP_MIXES: dict[str, Callable[[np.random.Generator], float]] = {
    "uniform": uniform_size,
    "buckets": bucketed_size,
}
TARGET_MIX = "uniform"


def step_size(rng: np.random.Generator, mix: str) -> float:
    """A signed relative step of the mix's size, either direction."""
    return STEP_MIXES[mix](rng) * float(rng.choice((-1.0, 1.0)))


def isolated_points(rng: np.random.Generator, n: int, k: int) -> list[int]:
    """``k`` distinct indices, no two adjacent."""
    while True:
        at = sorted(int(i) for i in rng.choice(n, k, replace=False))
        if all(b - a > 1 for a, b in itertools.pairwise(at)):
            return at


def make_series(seed: int, index: int, length: int | None = None, mix: str = TARGET_MIX) -> Series:
    """Series ``index`` of the corpus of ``seed`` and ``mix`` (``length``: not the drawn one)."""
    rng = np.random.default_rng([seed, index])
    category = str(rng.choice(CATEGORIES, p=CATEGORY_P))
    n = length or int(rng.integers(LENGTHS[0], LENGTHS[1] + 1))
    kind = "gauss" if rng.random() < 0.5 else "t3"
    cv = log_uniform(rng, 0.005, 0.02) if category == "bimodal" else log_uniform(rng, 0.005, 0.08)
    level = np.full(n, log_uniform(rng, 0.1, 1000.0))
    steps: list[int] = []
    sizes: list[float] = []
    if category == "step":
        steps = place_steps(rng, n, int(rng.integers(1, 3)))
        for at in steps:
            sizes.append(step_size(rng, mix))
            level[at:] *= 1.0 + sizes[-1]
    elif category == "drift":
        level *= 1.0 + rng.uniform(0.02, 0.06) * rng.choice((-1.0, 1.0)) * np.linspace(0, 1, n)
    elif category == "bimodal":
        level *= 1.0 + rng.uniform(0.03, 0.06) * (rng.random(n) < rng.uniform(0.2, 0.5))
    values = level * (1.0 + cv * noise(rng, kind, n))
    if category == "outliers":
        for at in isolated_points(rng, n, int(rng.integers(1, 5))):
            values[at] = level[at] * (1.0 + rng.choice((-1.0, 1.0)) * rng.uniform(3, 10) * cv)
    return Series(seed, index, category, kind, cv, values, level, tuple(steps), tuple(sizes))


def make_corpus(
    seed: int, count: int, length: int | None = None, mix: str = TARGET_MIX
) -> list[Series]:
    """Series 0..count-1 of ``seed`` and ``mix``."""
    return [make_series(seed, i, length, mix) for i in range(count)]


def in_bucket(value: float, bucket: tuple[float, float]) -> bool:
    """``low <= value < high`` (the last bucket includes its top)."""
    return bucket[0] <= value < bucket[1] or math.isclose(value, bucket[1])


# --- printing -------------------------------------------------------------------------------


def ratio(num: float, den: float) -> float:
    """``num / den``, NaN when there is nothing to divide."""
    return num / den if den else math.nan


def pct(x: float) -> str:
    """A fraction as a short percent (``-`` for NaN)."""
    return "-" if math.isnan(x) else f"{100 * x:.0f}%"


def num(x: float, digits: int = 2) -> str:
    """A float (``-`` for NaN)."""
    return "-" if math.isnan(x) else f"{x:.{digits}f}"


def print_rows(header: list[str], rows: list[list[str]]) -> None:
    """Left-aligned first column, right-aligned others."""
    widths = [max(len(r[c]) for r in [header, *rows]) for c in range(len(header))]
    for row in [header, *rows]:
        cells = [row[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)
        ]
        print("  " + "  ".join(cells))


def bucket_name(bucket: tuple[float, float]) -> str:
    """``2-3%``."""
    return f"{100 * bucket[0]:g}-{100 * bucket[1]:g}%"
