"""Change-point detection over one series: pure numpy and scipy, no database, no direction.

The method, in four stages:

1. **Propose** steps by binary segmentation with the normalised CUSUM statistic on a 3-point
   running median of the series (``segmentation``), so that an isolated outlier cannot
   create a proposal. Its ``sigma`` is a robust noise scale: the median absolute deviation
   of the first differences divided by sqrt(2), which a step barely moves (it adds one
   large difference). A segment without a split is searched again on its halves: a short
   bump or dip barely moves the means of the whole segment.
2. **Confirm** each proposal on the raw points either side, within ``window`` points and
   never past a neighbouring proposal: a Mann-Whitney U test (rank based, so heavy tails and
   outliers do not fool it) must give ``p <= max_p_value`` (and so must the raw samples,
   where they are given), the Hodges-Lehmann shift (the median of all pairwise differences
   across the split) must be at least the series' *minimum effect* of the level before,
   and both levels must hold at least ``min_segment`` points. Levels too short for a rank
   test to reach ``max_p_value`` (six points against six cannot go under 0.0022) are judged
   by the distance of their medians against the noise of the whole series
   (``_noise_p_value``), once their ranks separate them: a step a few points after a step is
   found as soon as its level holds ``min_segment`` points. Rejected proposals are dropped
   one at a time, the weakest first (highest p-value), and the rest re-confirmed with the
   wider windows that leaves, until all pass: a spurious proposal squeezed between two real
   steps cannot take them down with it by shortening their windows.
3. **Place** each confirmed step at the nearby split where two flat levels fit the windows
   best (``_loss``: the deviations from each side's median, squared near it and
   absolute beyond ``HUBER`` sigmas, so that Gaussian noise places a step nearly as its
   likelihood would and heavy tails do not pull it).
4. **Look between** the confirmed steps for small ones on long levels (``_between``): each
   stretch between two confirmed steps (or an end) is searched again by the same statistic,
   at a lower threshold (``STRETCH_THRESHOLD``: the rule that judges the split is the
   stricter test), and a split found there is judged by the small-step rule on up to
   ``LONG_WINDOW`` points a side. Stage 2's windows stop at every proposal, and a small step
   needs more points than they hold. Longer windows see more of a drift, and two flat levels
   must also fit the points better than a line by ``LINE_MARGIN`` (a ramp does not). Both
   sides of the split are searched again.

The minimum effect depends on the series' noise: ``noise_multiple`` times its relative noise
(``sigma`` over the level), but never under ``min_rel_floor`` (set per metric kind by
``registry``) nor over ``min_rel_change``. Where the raw samples are given, the noise taken
is at least the case's typical within-run noise: the median over its points of each one's
robust spread (``within_run_noise``: the samples' median absolute deviation over their
median). A case whose samples scatter within a run needs a bigger step than its medians'
run-to-run noise alone would ask for. A noisy series keeps the fixed minimum, which is what
stops a slow drift from passing as a step. A quiet one may report a step of a few times its
noise (a 2% step at 0.3% noise is real); there a drift of a few percent, or two modes whose
shares shift, would be many times the noise, so a step under ``min_rel_change`` must also
stand out from the trend of the levels and leave the range of the points before it
(``_stands_out``); one that does not is judged as a small step (below).

Under the minimum effect, a *small step* of ``small_noise_multiple`` sigmas or more is still
reported where both levels hold ``small_points`` points and it passes a stricter test, on the
points and on the points less the trend of every level of the series, and moves the whole
distribution (``_small_weakness``): a step of one or two sigmas is plain on twenty points a
side, and drift, chance and two modes whose shares shift are what it must be told from. The
trend is taken from every level of the series (between the proposals in stage 2, the steps
in stage 4), not from the two windows alone: on a drift, twenty points a side give a slope
noisy enough to leave a step where there is none.
Ten points a side are enough for a step of two or three sigmas: the stricter test is itself
the guard there, as ten points against ten pass it only when their ranks separate (one pair
out of order at most).

What this ignores, by construction: single outliers (stage 1's median and stage 2's ranks),
short blips (``min_segment``), bimodal noise (the mixture is the same on both sides, so the
ranks do not separate), slow drift (adjacent windows differ by less than ``min_rel_change``),
and steps at the very end (fewer than ``min_segment`` points after: no verdict yet).
"""

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from app.anomalies.segmentation import (
    FloatArray,
    binary_segmentation,
    running_median,
    strongest_split,
)
from app.core.sample_stats import rank_p_value
from app.core.spread import MIN_SAMPLES, relative_spread

STRETCH_THRESHOLD = 3.5  # the statistic a split of a stretch needs to be judged (stage 4)
SMALL_P_SHARE = 0.3  # a step under the minimum effect must pass at this share of max_p_value
SHORT_RANK_P = 0.01  # where a rank test cannot decide, it must at least separate the levels
TOO_SHORT = 2.0  # the weakness of a proposal whose levels hold too few points: above any p
REFINE_RADIUS = 5  # points either side of a proposal where the step may really start
HUBER = 0.7  # sigmas off a fit where its loss (``_loss``) stops squaring deviations
LONG_WINDOW = 60  # points each side a small step between confirmed steps is judged on
TREND_POINTS = 200  # a longer level is thinned to about this many for its trend (~20,000 pairs)
LINE_MARGIN = 1.05  # two levels' loss (``_loss``), this much under a line's
MAX_DEPTH = 4  # times a stretch is split again by stage 4
DECILES = (0.1, 0.9)  # what a small step must move (``_moves_whole``) ...
DECILE_SHARE = 0.4  # ... each by at least this share of the step's shift
MIN_NOISE_SAMPLES = MIN_SAMPLES  # samples a result needs before its spread says anything


@dataclass(frozen=True)
class DetectorConfig:
    """Thresholds of the change-point detector (``registry.ChangePointDetector``)."""

    min_segment: int = 5  # points a new level must hold before it counts as a step
    max_p_value: float = 0.001  # confirmation test across the step
    min_rel_change: float = 0.03  # the minimum effect on a noisy series: moves under 3% ignored
    window: int = 20  # points each side used to confirm a step
    noise_multiple: float = 3.0  # on a quiet series, the minimum effect is this many sigmas
    min_rel_floor: float = 0.005  # ... but never under this (the registry sets it per kind)
    small_noise_multiple: float = 1.0  # a smaller step, down to this many sigmas, ...
    small_points: int = 10  # ... needs this many points either side (and a stricter test)

    def small_effect(self, relative_noise: float) -> float:
        """The least relative step reported where both levels hold ``small_points`` points."""
        wanted = self.small_noise_multiple * relative_noise
        return min(self.min_effect(relative_noise), max(self.min_rel_floor, wanted))

    def min_effect(self, relative_noise: float, within_run: float = 0.0) -> float:
        """The least relative step reported on a series with this relative noise.

        Args:
            relative_noise: the series' run-to-run noise over its level.
            within_run: the case's typical within-run noise (``typical_within_run_noise``);
                the noise taken is never under it.
        """
        wanted = self.noise_multiple * max(relative_noise, within_run)
        return min(self.min_rel_change, max(self.min_rel_floor, wanted))


SHAPES = ("noise", "bimodal")  # the kinds of a shape change (``shapes``); any other: "step"


@dataclass(frozen=True)
class ChangePoint:
    """A confirmed step: ``index`` is the first point of the new level (in the input)."""

    index: int
    before: float  # median of the level before
    after: float  # median of the level after
    rel_change: float  # (after - before) / |before|
    p_value: float
    before_spread: float  # median absolute deviation before
    after_spread: float  # median absolute deviation after
    kind: str = "step"  # or a shape change's (``SHAPES``): spreads, not levels, moved


def find_change_points(
    values: npt.ArrayLike,
    config: DetectorConfig = DetectorConfig(),
    samples: Sequence[Sequence[float] | None] | None = None,
) -> list[ChangePoint]:
    """Steps in a series: proposed by change-point search, kept if the test and size agree.

    Args:
        values: the series in time order; NaN marks a missing or failed point.
        config: thresholds.
        samples: optionally each point's raw samples (None where absent).
    """
    series = np.asarray(values, dtype=np.float64)
    observed = np.flatnonzero(np.isfinite(series))
    points = series[observed]
    if len(points) < 2 * config.min_segment:
        return []  # too short for a verdict
    kept_samples = [samples[int(i)] for i in observed] if samples is not None else None
    sigma = noise_scale(points)
    proposals = binary_segmentation(running_median(points), sigma, config.min_segment)
    if not proposals:
        return []
    within = typical_within_run_noise(kept_samples) if kept_samples is not None else 0.0
    judged = _Judged(
        points, config, max(relative_noise(points, sigma), within), sigma, kept_samples
    )
    confirmed = _confirm(judged, proposals)
    confirmed += _between(judged, [split for split, _ in confirmed])
    return [
        _change_point(points, observed, split, bounds, config, sigma)
        for split, bounds in sorted(confirmed)
    ]


def noise_scale(points: FloatArray) -> float:
    """Robust standard deviation of the noise, insensitive to a few steps and outliers."""
    differences = np.diff(points)
    mad = float(np.median(np.abs(differences - np.median(differences))))
    sigma = 1.4826 * mad / np.sqrt(2.0)
    floor = 1e-9 * max(1.0, float(np.median(np.abs(points))))
    return float(max(sigma, floor))


def relative_noise(points: FloatArray, sigma: float) -> float:
    """The noise scale as a fraction of the series' typical level (inf at a level of 0)."""
    level = float(np.median(np.abs(points)))
    return sigma / level if level > 0 else float("inf")


def within_run_noise(samples: Sequence[float]) -> float | None:
    """One result's within-run noise: its samples' median absolute deviation over their median.

    None with fewer than ``MIN_NOISE_SAMPLES`` samples or a median of 0 (no spread to tell);
    ``core.spread`` is its one home (ingest stores it as ``Result.spread``).
    """
    return relative_spread(samples)


def typical_within_run_noise(samples: Sequence[Sequence[float] | None]) -> float:
    """The median within-run noise of the points that have samples (0 when none has)."""
    noises = [n for s in samples if s and (n := within_run_noise(s)) is not None]
    return float(np.median(noises)) if noises else 0.0


Bounds = tuple[int, int]  # [start of the left window, end of the right window)


@dataclass(frozen=True)
class _Judged:
    """A series under judgement: its points and what every stage reads of it."""

    points: FloatArray
    config: DetectorConfig
    noise: float  # relative noise, at least the typical within-run noise
    sigma: float  # noise scale (``noise_scale``)
    samples: Sequence[Sequence[float] | None] | None  # each point's raw samples, if given


def _confirm(judged: _Judged, proposals: list[int]) -> list[tuple[int, Bounds]]:
    """The proposals that pass, each with the window bounds it was judged on."""
    points, config = judged.points, judged.config
    # Dropping a proposal widens only its neighbours' windows: every other placement and rank
    # test is reused. Verdicts are reused only under the same trend, which merging two levels
    # changes.
    placements: dict[tuple[int, Bounds], int] = {}
    p_values: dict[tuple[int, Bounds], float] = {}
    verdicts: dict[tuple[tuple[int, Bounds], float], float | None] = {}
    current = proposals
    while True:
        proposed = _with_bounds(current, len(points), config.window)
        for key in proposed:
            if key not in placements:
                placements[key] = _refine(points, *key, config.min_segment, judged.sigma)
        placed = sorted({placements[key] for key in proposed})
        windows = _with_bounds(placed, len(points), config.window)
        # The trend of the levels between the proposals still standing: a staircase of
        # proposals on a drift leaves each level flat, and dropping them restores its slope.
        edges = [0, *placed, len(points)]
        slope = _trend_slope(*(points[a:b] for a, b in itertools.pairwise(edges)))
        for key in windows:
            if key not in p_values:
                left, right = points[key[1][0] : key[0]], points[key[0] : key[1][1]]
                p_values[key] = _level_p_value(left, right, judged.sigma, config.max_p_value)
            if (key, slope) not in verdicts:
                verdicts[(key, slope)] = _weakness(judged, *key, slope, p_values[key])
        failing = [
            (weakness, key[0])
            for key in windows
            if (weakness := verdicts[(key, slope)]) is not None
        ]
        if not failing:
            return windows
        weakest = max(failing)[1]
        current = [split for split in placed if split != weakest]


def _with_bounds(splits: list[int], n: int, window: int) -> list[tuple[int, Bounds]]:
    edges = [0, *splits, n]
    return [
        (split, (max(edges[i], split - window), min(edges[i + 2], split + window)))
        for i, split in enumerate(splits)
    ]


def _weakness(
    judged: _Judged, split: int, bounds: Bounds, slope: float, p_value: float
) -> float | None:
    """None when the split passes; else how weak it is (its p-value, ``TOO_SHORT`` at most).

    ``slope``: the trend of the levels (``_trend_slope``); ``p_value``: ``_level_p_value``'s.
    """
    points, config, noise = judged.points, judged.config, judged.noise
    left, right = points[bounds[0] : split], points[split : bounds[1]]
    if min(len(left), len(right)) < config.min_segment:
        return TOO_SHORT
    shift, size = _shift(left, right)
    least = config.min_effect(noise)
    if size < least or (size < config.min_rel_change and not _stands_out(left, right, least)):
        # Under the minimum effect, or over it on a quiet series but not out of the old
        # level's range: the small-step rule decides, so that a bigger step is never judged
        # more harshly than a smaller one.
        weakness = _small_weakness(left, right, config, noise, shift, size, p_value, slope)
        if weakness is not None:
            return weakness
    elif p_value > config.max_p_value:
        return p_value
    if _samples_disagree(judged.samples, split, bounds, config.max_p_value):
        return p_value
    return None


def _shift(left: FloatArray, right: FloatArray) -> tuple[float, float]:
    """The step's Hodges-Lehmann shift, and its size: the shift over the level before (or 0)."""
    shift = float(np.median(np.subtract.outer(right, left)))
    before = float(np.median(left))
    return shift, abs(shift) / abs(before) if before else 0.0


def _samples_disagree(
    samples: Sequence[Sequence[float] | None] | None, split: int, bounds: Bounds, max_p: float
) -> bool:
    """Whether the raw samples either side of ``split`` fail the rank test (none: they agree)."""
    if samples is None:
        return False
    sides = [[s for s in samples[a:b] if s] for a, b in ((bounds[0], split), (split, bounds[1]))]
    if not all(sides):
        return False
    return rank_p_value(*(np.concatenate(side).astype(np.float64) for side in sides)) > max_p


def _small_weakness(
    left: FloatArray,
    right: FloatArray,
    config: DetectorConfig,
    noise: float,
    shift: float,
    size: float,
    p_value: float,
    slope: float,
) -> float | None:
    """The verdict on a step under the minimum effect (``shift``, ``size``: ``_shift``'s).

    Such a step is a sigma or two, and its three likenesses, a drift, chance and two modes
    whose shares shift, are ruled out with more points and a stricter test: both levels hold
    ``small_points`` points, the shift is at least ``small_effect``, the whole distribution
    moved (``_moves_whole``), and the rank test passes at ``SMALL_P_SHARE`` of
    ``max_p_value`` on the points as they are and on the points less the trend ``slope`` of
    every level of the series (a drift leaves no step once its slope is taken out), whose
    new level must also stand off that trend (``_beyond_trend``).
    """
    least = config.small_effect(noise)
    if size < least or min(len(left), len(right)) < config.small_points:
        return p_value
    strict = config.max_p_value * SMALL_P_SHARE
    if p_value > strict or not _moves_whole(left, right, shift):
        return p_value
    if rank_p_value(*_detrended(left, right, slope)) > strict:
        return p_value
    if not _beyond_trend(left, right, least, slope):
        return p_value
    return None


def _between(judged: _Judged, splits: list[int]) -> list[tuple[int, Bounds]]:
    """Stage 4: the small steps found between the confirmed ``splits``, with their bounds."""
    found: list[tuple[int, Bounds]] = []
    for start, stop in itertools.pairwise([0, *splits, len(judged.points)]):
        _search_stretch(judged, start, stop, splits, found, 0)
    return found


def _search_stretch(
    judged: _Judged,
    start: int,
    stop: int,
    splits: list[int],
    found: list[tuple[int, Bounds]],
    depth: int,
) -> None:
    """The best split of the points ``[start, stop)``, judged; then each side, searched again."""
    if depth > MAX_DEPTH:
        return
    points, config = judged.points, judged.config
    smoothed = running_median(points[start:stop])
    proposal, statistic = strongest_split(smoothed, judged.sigma, config.small_points)
    if statistic <= STRETCH_THRESHOLD:
        return
    near = (max(start, start + proposal - LONG_WINDOW), min(stop, start + proposal + LONG_WINDOW))
    split = _refine(points, start + proposal, near, config.small_points, judged.sigma)
    if min(split - start, stop - split) < config.small_points:
        return
    bounds = (max(start, split - LONG_WINDOW), min(stop, split + LONG_WINDOW))
    steps = sorted({split, *splits, *(at for at, _ in found)})
    if _long_small_step(judged, split, bounds, steps):
        found.append((split, bounds))
    for side in ((start, split), (split, stop)):
        _search_stretch(judged, *side, splits, found, depth + 1)


def _long_small_step(judged: _Judged, split: int, bounds: Bounds, steps: list[int]) -> bool:
    """Whether ``split`` is a small step (stage 4), judged on the points within ``bounds``.

    The small-step rule, its trend that of every level of the series between ``steps`` (the
    split, the confirmed steps and those found so far): a scan picks the split where the
    levels look flattest, so a trend from its own two levels is too flat on a drift. Two
    flat levels must also fit the windows better than a line does (``LINE_MARGIN``).
    """
    points, config, noise = judged.points, judged.config, judged.noise
    left, right = points[bounds[0] : split], points[split : bounds[1]]
    shift, size = _shift(left, right)
    if size < config.small_effect(noise):
        return False
    edges = [0, *steps, len(points)]
    slope = _trend_slope(*(points[a:b] for a, b in itertools.pairwise(edges)))
    p_value = _level_p_value(left, right, judged.sigma, config.max_p_value)
    if _small_weakness(left, right, config, noise, shift, size, p_value, slope) is not None:
        return False
    window = points[bounds[0] : bounds[1]]
    two_levels = _two_level_cost(points, bounds[0], split, bounds[1], judged.sigma)
    if two_levels * LINE_MARGIN >= _line_cost(window, judged.sigma):
        return False
    return not _samples_disagree(judged.samples, split, bounds, config.max_p_value)


def _moves_whole(left: FloatArray, right: FloatArray, shift: float) -> bool:
    """Whether the whole distribution moved: its low and high deciles, each by a share of it.

    Each by ``DECILE_SHARE`` of ``shift`` or more. Two modes whose shares change move the
    median a long way and the deciles hardly at all (each stays in its mode): a shape change
    (``shapes``), not a step.
    """
    moved = np.quantile(right, DECILES) - np.quantile(left, DECILES)
    return bool(np.all(moved * np.sign(shift) >= abs(shift) * DECILE_SHARE))


def _line_cost(points: FloatArray, sigma: float) -> float:
    """How badly the Theil-Sen line of the points fits them (``_loss``)."""
    at = np.arange(len(points), dtype=np.float64)
    slope = float(np.median(_pair_slopes(points)))
    intercept = float(np.median(points - slope * at))
    return _loss(points - intercept - slope * at, sigma)


def _stands_out(left: FloatArray, right: FloatArray, least: float) -> bool:
    """Whether a step under the fixed minimum is one: off the trend, outside the old range.

    A quiet series' two look-alikes of a small step: a drift (``_beyond_trend``), and a
    mixture of two levels whose share shifts between the windows. In the second, the new
    level is one the old window already visited: its median lies inside the range of the
    points before, where a step of several sigmas takes it out.
    """
    median = float(np.median(right))
    outside = median > float(left.max()) or median < float(left.min())
    return outside and _beyond_trend(left, right, least)


def _beyond_trend(
    left: FloatArray, right: FloatArray, least: float, slope: float | None = None
) -> bool:
    """Whether the new level stands out from the trend of the levels by ``least``.

    The trend (``slope``, by default ``_trend_slope`` of the two levels) is carried from the
    middle of the points before to the middle of the points after: a ramp lands on it, a
    step does not.
    """
    if slope is None:
        slope = _trend_slope(left, right)
    middle_before = (len(left) - 1) / 2
    middle_after = len(left) + (len(right) - 1) / 2
    expected = float(np.median(left)) + slope * (middle_after - middle_before)
    if expected == 0:
        return True
    return abs(float(np.median(right)) - expected) / abs(expected) >= least


def _trend_slope(*levels: FloatArray) -> float:
    """The trend of levels: the median slope between pairs of points of the same level.

    Theil-Sen within each level, pooled: robust to outliers, and blind to the steps between
    them. A level of more than ``TREND_POINTS`` is thinned to about that many points first.
    0 where no level holds two points.
    """
    slopes = [_pair_slopes(level, max(1, -(-len(level) // TREND_POINTS))) for level in levels]
    pooled = np.concatenate(slopes) if slopes else np.empty(0)
    return float(np.median(pooled)) if len(pooled) else 0.0


def _detrended(left: FloatArray, right: FloatArray, slope: float) -> tuple[FloatArray, FloatArray]:
    """Both levels less the trend ``slope``, from the start of ``left``."""
    at = np.arange(len(left) + len(right), dtype=np.float64) * slope
    return left - at[: len(left)], right - at[len(left) :]


def _pair_slopes(points: FloatArray, every: int = 1) -> FloatArray:
    """The slope between every pair of points, or of every ``every``-th point."""
    kept = points[::every]
    i, j = np.triu_indices(len(kept), k=1)
    return (kept[j] - kept[i]) / ((j - i) * every)


def _level_p_value(left: FloatArray, right: FloatArray, sigma: float, max_p: float) -> float:
    """How likely two levels this far apart are one: by their ranks, or their noise if short.

    Levels too short for the rank test to reach ``max_p`` are judged by ``_noise_p_value``,
    where their ranks at least separate them (``SHORT_RANK_P``).
    """
    p_value = rank_p_value(left, right)
    if _rank_floor(len(left), len(right)) > max_p and p_value <= SHORT_RANK_P:
        return _noise_p_value(left, right, sigma)
    return p_value


def _rank_floor(left: int, right: int) -> float:
    """The smallest two-sided p-value a rank test of this many points either side can give."""
    return 2.0 / math.comb(left + right, left)


def _noise_p_value(left: FloatArray, right: FloatArray, sigma: float) -> float:
    """Two levels' medians apart, judged against the noise of the whole series.

    For levels too short for a rank test to decide (``_rank_floor``): six points against
    six can never give a p-value under 0.0022, however far apart they are. The series'
    noise scale, learnt from all of its points, can: the difference of two medians of
    ``n`` and ``m`` points has a standard deviation of about ``sigma * sqrt(pi / 2 *
    (1 / n + 1 / m))`` under Gaussian noise, and no less under heavy tails (where
    ``sigma``, a median absolute deviation, is small beside the standard deviation, but
    the medians are steadier still).
    """
    from scipy.stats import norm

    spread = sigma * math.sqrt(math.pi / 2 * (1 / len(left) + 1 / len(right)))
    z = abs(float(np.median(right)) - float(np.median(left))) / spread
    return float(2 * norm.sf(z))


def _change_point(
    points: FloatArray,
    observed: npt.NDArray[np.intp],
    split: int,
    bounds: Bounds,
    config: DetectorConfig,
    sigma: float,
) -> ChangePoint:
    left, right = points[bounds[0] : split], points[split : bounds[1]]
    p_value = _level_p_value(left, right, sigma, config.max_p_value)
    return step_between(int(observed[split]), left, right, p_value)


def step_between(
    index: int, left: FloatArray, right: FloatArray, p_value: float | None = None
) -> ChangePoint:
    """The step from the points ``left`` to the points ``right``, starting at ``index``.

    ``p_value``: the test's that decided it; by default the rank test's of the two.
    """
    before, after = float(np.median(left)), float(np.median(right))
    return ChangePoint(
        index=index,
        before=before,
        after=after,
        rel_change=(after - before) / abs(before),
        p_value=rank_p_value(left, right) if p_value is None else p_value,
        before_spread=float(np.median(np.abs(left - before))),
        after_spread=float(np.median(np.abs(right - after))),
    )


def _refine(points: FloatArray, split: int, bounds: Bounds, min_segment: int, sigma: float) -> int:
    """The split near the proposal where two flat levels fit best (``_two_level_cost``).

    It may land where fewer than ``min_segment`` points follow (the step is that new), and
    is then judged too short: a proposal can only sit ``min_segment`` points from the end,
    so without this a step three points old was confirmed two points too early.
    """
    start, stop = bounds
    low = max(start + min_segment, split - REFINE_RADIUS)
    high = min(stop - 1, split + REFINE_RADIUS)
    return min(
        range(low, high + 1),
        key=lambda k: _two_level_cost(points, start, k, stop, sigma),
        default=split,
    )


def _two_level_cost(points: FloatArray, start: int, split: int, stop: int, sigma: float) -> float:
    """How badly two flat levels split at ``split`` fit ``points[start:stop]``."""
    left, right = points[start:split], points[split:stop]
    return _loss(left - np.median(left), sigma) + _loss(right - np.median(right), sigma)


def _loss(deviations: FloatArray, sigma: float) -> float:
    """Huber's loss of deviations in sigmas: squared within ``HUBER`` of 0, absolute beyond."""
    r = np.abs(deviations) / sigma
    return float(np.where(r < HUBER, r * r / 2, HUBER * r - HUBER * HUBER / 2).sum())
