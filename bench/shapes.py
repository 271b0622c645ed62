"""Shape changes (``app.anomalies.shapes``): noise that rises and modes that split, found or not.

A seeded corpus of its own (``make_shape_series(seed, i)`` rebuilds series ``i``), 700 series
(``--quick``: 210), each 35-120 points: a first part of 20-60 points, then 15-60 more. Noise
is multiplicative, ``cv`` log-uniform in 0.5-5%, of a family from ``bench/unit_corpus.py``
(Gaussian, Student-t with 3 degrees of freedom, log-normal skew). Half the series carry
within-run samples (10 per point, the point their median). Categories, evenly:

- ``noise``: from the second part on, the noise is 2-4 times larger; on the points, or (where
  the series has samples) on the samples within each run, the points unmoved.
- ``bimodal``: from the second part on, the points fall on one of two levels 5-12 noise units
  apart (the upper one drawn with probability 0.15-0.4, as an autotuner picking one of two
  kernels); or (with samples) the samples within each run do (clocks switching).
- no shape change: ``flat``; ``steady bimodal`` (two modes from the start); ``step`` (the
  level moves by 3-10 noise units, the step detector's business); ``drift`` (5% over the
  series); ``outliers`` (three isolated points 5-10 noise units off).

A finding is right when it lies within 5 points (``REFINE_RADIUS``) of the change and names
its kind; any other finding is false. The steps the change-point detector finds are passed in,
as the service does. Printed: per category, the series, findings right, false findings, and
false findings per 1,000 points; recall and precision per kind; overall false alarms per
1,000 points of the series with no shape change.
"""

import time
from dataclasses import dataclass

import numpy as np

from app.anomalies.detectors import REFINE_RADIUS, find_change_points
from app.anomalies.shapes import find_shape_changes
from bench.corpus import log_uniform, num, print_rows, ratio
from bench.unit_corpus import unit_noise

SHAPE_CATEGORIES = ("noise", "bimodal", "flat", "steady bimodal", "step", "drift", "outliers")
FAMILIES = ("gauss", "t3", "skew")
SAMPLES = 10
SERIES_FULL, SERIES_QUICK = 700, 210


@dataclass(frozen=True)
class ShapeSeries:
    """One labelled series: its points, maybe its samples, where and what changed."""

    index: int
    category: str
    family: str
    values: np.ndarray
    samples: list[list[float]] | None
    change: int | None  # the first point of the new shape


def make_shape_series(seed: int, index: int) -> ShapeSeries:
    """Series ``index`` of the shape corpus of ``seed``."""
    rng = np.random.default_rng([seed, 11, index])
    category = SHAPE_CATEGORIES[index % len(SHAPE_CATEGORIES)]
    family = FAMILIES[int(rng.integers(len(FAMILIES)))]
    first, second = int(rng.integers(20, 61)), int(rng.integers(15, 61))
    n, cv = first + second, log_uniform(rng, 0.005, 0.05)
    with_samples = bool(rng.random() < 0.5)
    level = np.full(n, log_uniform(rng, 0.1, 1000.0))
    scale = np.ones(n)  # the noise's multiple, point by point
    upper = np.zeros(n, dtype=bool)  # the point (or its samples) on the upper mode
    share, gap = rng.uniform(0.15, 0.4), rng.uniform(5, 12) * cv
    if category == "noise":
        scale[first:] = rng.uniform(2, 4)
    elif category == "bimodal":
        upper[first:] = True
    elif category == "steady bimodal":
        upper[:] = True
    elif category == "step":
        level[first:] *= 1 + float(rng.choice((-1.0, 1.0))) * rng.uniform(3, 10) * cv
    elif category == "drift":
        level *= 1 + 0.05 * np.linspace(0, 1, n)
    if with_samples:
        samples = []
        for i in range(n):
            modes = upper[i] & (rng.random(SAMPLES) < share)
            run = (
                level[i]
                * (1 + gap * modes)
                * (1 + cv * scale[i] * unit_noise(rng, family, SAMPLES))
            )
            samples.append([float(x) for x in run])
        values = np.array([float(np.median(s)) for s in samples])
    else:
        modes = upper & (rng.random(n) < share)
        values = level * (1 + gap * modes) * (1 + cv * scale * unit_noise(rng, family, n))
        samples = None
    if category == "outliers":
        for spot in rng.choice(np.arange(1, n - 1, 3), 3, replace=False):
            values[spot] *= 1 + float(rng.choice((-1.0, 1.0))) * rng.uniform(5, 10) * cv
    change = first if category in ("noise", "bimodal") else None
    return ShapeSeries(index, category, family, values, samples, change)


@dataclass
class Tally:
    """One category's counts."""

    series: int = 0
    points: int = 0
    right: int = 0
    false: int = 0
    found: int = 0


def score(seed: int, count: int) -> dict[str, Tally]:
    """Every series of the corpus judged, tallied per category."""
    tallies = {category: Tally() for category in SHAPE_CATEGORIES}
    for index in range(count):
        series = make_shape_series(seed, index)
        steps = [c.index for c in find_change_points(series.values, samples=series.samples)]
        found = find_shape_changes(series.values, samples=series.samples, steps=steps)
        tally = tallies[series.category]
        tally.series += 1
        tally.points += len(series.values)
        tally.found += len(found)
        right = [
            c
            for c in found
            if series.change is not None
            and abs(c.index - series.change) <= REFINE_RADIUS
            and c.kind == series.category
        ][:1]
        tally.right += len(right)
        tally.false += len(found) - len(right)
    return tallies


def print_scores(tallies: dict[str, Tally], seconds: float) -> None:
    """The table per category, then recall and precision per kind and the false alarm rate."""
    print(f"\n=== shape changes ({seconds:.1f} s) ===\n")
    rows = [
        [
            category,
            str(t.series),
            str(t.right) if category in ("noise", "bimodal") else "-",
            str(t.false),
            num(1000 * ratio(t.false, t.points)),
        ]
        for category, t in tallies.items()
    ]
    print_rows(["category", "series", "found right", "false", "false/1k points"], rows)
    for kind in ("noise", "bimodal"):
        t = tallies[kind]
        print(
            f"  {kind}: recall {num(ratio(t.right, t.series))}"
            f" (within {REFINE_RADIUS} points, the kind named)"
        )
    quiet = [t for c, t in tallies.items() if c not in ("noise", "bimodal")]
    false = sum(t.false for t in quiet)
    points = sum(t.points for t in quiet)
    right = sum(tallies[k].right for k in ("noise", "bimodal"))
    found = sum(t.found for t in tallies.values())
    print(f"  precision {num(ratio(right, found))} over {found} findings")
    rate = num(1000 * ratio(false, points))
    print(f"  false alarms per 1,000 points without a shape change: {rate}")


def run(seed: int, quick: bool) -> None:
    """Score and print the corpus of ``seed``."""
    began = time.perf_counter()
    tallies = score(seed, SERIES_QUICK if quick else SERIES_FULL)
    print_scores(tallies, time.perf_counter() - began)
