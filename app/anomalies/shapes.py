"""Shape changes: a series whose noise rises or that splits into two modes, its level unmoved.

A step detector sees the level; a series can get worse without its level moving. Its points
scatter twice as far (a noisy neighbour, a thermal limit), or they fall on two levels (the
autotuner picking one kernel or another from run to run, clocks switching between two
states), or the samples within each run do. Both make every later comparison less sure, and
neither is a step. This finds them, pure numpy and scipy like ``detectors``:

1. **Propose** where the spread changes: binary segmentation (``detectors``'s) over the
   series' *point-to-point movement*, the absolute differences of neighbouring points, which
   a level does not enter and a doubled noise doubles; and, where the raw samples are given,
   over each point's within-run noise (``detectors.within_run_noise``).
2. **Confirm** each proposal on ``window`` values either side (never past a neighbouring
   one, each side at least ``min_points``): a Mann-Whitney U test must say the later values
   are the larger (``p <= max_p_value``), and their median must be ``min_ratio`` times the
   earlier one's, or the later points must be bimodal where the earlier are not.
3. **Name** it: ``bimodal`` when the points after it (or their samples) fall into two modes
   (``modes``: the best split of the sorted values leaves each side at least ``min_share``
   of them and their means ``separation`` pooled standard deviations apart) and the points
   before do not; else ``noise``.

A step of the level is no shape change: a proposal within ``REFINE_RADIUS`` points of a step
the step detectors found is dropped (the service passes them), and a level that moves by
more than the noise it had between the two windows is left to them too. A drop of the
spread (a quieter series) is not reported.
"""

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from app.anomalies.detectors import REFINE_RADIUS, ChangePoint, within_run_noise
from app.anomalies.segmentation import FloatArray
from app.core.modes import MIN_SHARE, SEPARATION, Modes, best_splits, two_modes

MODES_P_VALUE = 0.01  # Fisher's test of the new mode's share before and after its onset
BIMODAL_P_FACTOR = 10  # two modes are evidence of their own: the spread test may be this weaker
SCAN_Z = 3.0  # the rank scan's z-score a split needs to be judged


def in_words(kind: str, rel_change: float) -> str:
    """A shape change in a few words: ``noise x2.4`` (its spread's ratio), ``bimodal``."""
    return f"noise x{rel_change + 1:.1f}" if kind == "noise" else kind


@dataclass(frozen=True)
class ShapeConfig:
    """Thresholds of the shape detector (``registry.ShapeDetector``)."""

    min_points: int = 10  # points either side of a shape change
    window: int = 30  # points either side judged
    min_ratio: float = 2.0  # the spread at least doubles ...
    max_p_value: float = 0.0003  # ... by a rank test this sure (strict: every split is tried)
    separation: float = SEPARATION  # two modes: their means this many pooled sd apart ...
    min_share: float = MIN_SHARE  # ... and the smaller holds this share of the points


def find_shape_changes(
    values: npt.ArrayLike,
    config: ShapeConfig = ShapeConfig(),
    samples: Sequence[Sequence[float] | None] | None = None,
    steps: Sequence[int] = (),
) -> list[ChangePoint]:
    """The shape changes of a series, in time order (``index``: a position in ``values``).

    Args:
        values: the series in time order; NaN marks a missing or failed point.
        config: thresholds.
        samples: optionally each point's raw samples (None where absent).
        steps: where the step detectors found steps (positions in ``values``).
    """
    series = np.asarray(values, dtype=np.float64)
    observed = np.flatnonzero(np.isfinite(series))
    points = series[observed]
    if len(points) < 2 * config.min_points + 1:
        return []
    found = _on_points(points, config) + _on_modes(points, config)
    if samples is not None:
        found += _on_samples(points, [samples[int(i)] for i in observed], config)
    changes: dict[int, ChangePoint] = {}
    for split, change in sorted(found, key=lambda pair: pair[1].p_value):
        index = int(observed[split])
        near_step = any(abs(index - at) <= REFINE_RADIUS for at in steps)
        near_other = any(abs(index - at) <= REFINE_RADIUS for at in changes)
        if not near_step and not near_other:
            changes[index] = replace(change, index=index)
    return [changes[index] for index in sorted(changes)]


def _on_points(points: FloatArray, config: ShapeConfig) -> list[tuple[int, ChangePoint]]:
    """Shape changes of the points themselves, from their point-to-point movement.

    ``movement[i]`` is how far point ``i + 1`` moved from point ``i``; a split at movement
    ``k`` is a split of the points at ``k + 1``.
    """
    movement = np.abs(np.diff(points))
    proposals = _proposals(movement, config.min_points, config.window)
    found = []
    for k, (start, stop) in _bounds(sorted(proposals), len(movement), config.window):
        before, after = movement[start:k], movement[k:stop]
        left, right = points[start : k + 1], points[k + 1 : stop + 1]
        if min(len(before), len(after)) < config.min_points:
            continue
        change = _judge(before, after, left, right, config)
        if change is not None:
            found.append((k + 1, change))
    return found


def _on_modes(points: FloatArray, config: ShapeConfig) -> list[tuple[int, ChangePoint]]:
    """Points that start falling on two modes, one of them the level they had.

    The movement test is weak here (a mode drawn a fifth of the time moves few neighbouring
    points), the modes themselves are not: every split whose ``window`` points after hold two
    interleaved modes (``Modes.interleaved``), one at the level of the points before it,
    which do not, names the first point after it on the new mode; the point most splits name
    is where the new mode began (no earlier point can be told to be on it). Its p-value is
    Fisher's exact test of the new mode's count in the ``window`` points before against
    after.
    """
    from scipy.stats import fisher_exact

    if not _any_two_modes(points, config):
        return []
    n, window = len(points), config.window
    named: dict[int, int] = {}
    for k in range(config.min_points, n - config.min_points + 1):
        left, right = points[max(0, k - window) : k], points[k : k + window]
        split = modes(right, config)
        if split is None or not split.interleaved(right) or modes(left, config) is not None:
            continue
        level, typical = float(np.median(left)), float(np.median(np.abs(np.diff(left))))
        if not split.keeps(level, typical):
            continue
        on_new = split.new_mode(right, level)
        if on_new.any() and not split.new_mode(left, level).any():
            first = k + int(np.argmax(on_new))
            named[first] = named.get(first, 0) + 1
    if not named:
        return []
    onset = max(sorted(named), key=lambda at: named[at])
    left, right = points[max(0, onset - window) : onset], points[onset : onset + window]
    split = modes(right, config)
    if split is None or len(left) < config.min_points or len(right) < config.min_points:
        return []
    level = float(np.median(left))
    after = int(split.new_mode(right, level).sum())
    table = [[after, len(right) - after], [int(split.new_mode(left, level).sum()), len(left)]]
    table[1][1] -= table[1][0]
    p_value = float(fisher_exact(table, alternative="greater")[1])
    if p_value > MODES_P_VALUE:
        return []
    spread_before = float(np.median(np.abs(left - level)))
    spread_after = float(np.median(np.abs(right - float(np.median(right)))))
    change = ChangePoint(
        index=onset,
        before=level,
        after=float(np.median(right)),
        rel_change=(split.high - split.low) / abs(level) if level else float("inf"),
        p_value=p_value,
        before_spread=spread_before,
        after_spread=spread_after,
        kind="bimodal",
    )
    return [(onset, change)]


def _on_samples(
    points: FloatArray, samples: Sequence[Sequence[float] | None], config: ShapeConfig
) -> list[tuple[int, ChangePoint]]:
    """Shape changes of the samples within runs, from each point's within-run noise."""
    noises = [within_run_noise(s) if s else None for s in samples]
    kept = np.array([i for i, n in enumerate(noises) if n is not None], dtype=np.intp)
    if len(kept) < 2 * config.min_points:
        return []
    spread = np.array([noises[i] for i in kept], dtype=np.float64)
    proposals = _proposals(spread, config.min_points, config.window)
    found = []
    for k, (start, stop) in _bounds(sorted(proposals), len(spread), config.window):
        before, after = spread[start:k], spread[k:stop]
        if min(len(before), len(after)) < config.min_points:
            continue
        left = _normalised(samples, kept[start:k])
        right = _normalised(samples, kept[k:stop])
        change = _judge(before, after, left, right, config)
        if change is not None:
            level = points[kept[start:k]], points[kept[k:stop]]
            found.append((int(kept[k]), _with_levels(change, *level)))
    return found


def spread_grows(spreads: Sequence[float], config: ShapeConfig = ShapeConfig()) -> bool:
    """Whether the stored within-run spreads (``Result.spread``; NaN: none) grow somewhere.

    The samples' path judged on the spreads alone, as loosely as ``_judge`` ever accepts: a
    gate, so that detection reads a series' samples only where their spread moved.
    """
    from scipy.stats import mannwhitneyu

    spread = np.asarray(spreads, dtype=np.float64)
    spread = spread[np.isfinite(spread)]
    if len(spread) < 2 * config.min_points:
        return False
    for k, (start, stop) in _bounds(
        sorted(_proposals(spread, config.min_points, config.window)), len(spread), config.window
    ):
        before, after = spread[start:k], spread[k:stop]
        if min(len(before), len(after)) < config.min_points or np.ptp(spread[start:stop]) == 0:
            continue
        p_value = float(mannwhitneyu(after, before, alternative="greater").pvalue)
        if p_value <= config.max_p_value * BIMODAL_P_FACTOR:
            return True
    return False


def _proposals(spread: FloatArray, min_points: int, window: int) -> list[int]:
    """Where ``spread`` (non-negative values) grows, best first: a rank scan.

    Every split ``k`` (``spread[k:]`` after it) is scored by the Mann-Whitney statistic of
    the ``window`` values after it against the ``window`` before (fewer at the ends, never
    under ``min_points``), as a z-score, all at once from one table of pairwise comparisons
    and its two-dimensional prefix sums. The best split is kept, the splits within a window
    of it dropped, and so on while a split scores ``SCAN_Z``.
    """
    n = len(spread)
    if n < 2 * min_points:
        return []
    greater = (spread[:, None] > spread[None, :]).astype(np.float64)
    greater += 0.5 * (spread[:, None] == spread[None, :])
    table = np.zeros((n + 1, n + 1))
    table[1:, 1:] = greater.cumsum(axis=0).cumsum(axis=1)
    k = np.arange(min_points, n - min_points + 1)
    start, stop = np.maximum(0, k - window), np.minimum(n, k + window)
    u = table[stop, k] - table[k, k] - table[stop, start] + table[k, start]
    before, after = k - start, stop - k
    mean = before * after / 2
    sd = np.sqrt(before * after * (before + after + 1) / 12)
    z = (u - mean) / sd
    chosen: list[int] = []
    order = np.argsort(-z, kind="stable")
    for i in order:
        if z[i] < SCAN_Z:
            break
        if all(abs(int(k[i]) - other) >= window for other in chosen):
            chosen.append(int(k[i]))
    return [_placed(spread, at, min_points, window) for at in chosen]


def _placed(spread: FloatArray, at: int, min_points: int, window: int) -> int:
    """Where near ``at`` the scale changes most likely: two scales fit best either side.

    The rank scan's peak is broad (each score sums a window); the split that maximises the
    likelihood of two exponential scales (the log of each side's mean, weighted by its
    count) within the window is sharper.
    """
    start, stop = max(0, at - window), min(len(spread), at + window)
    values = np.maximum(spread[start:stop], 1e-300)
    n = len(values)
    k = np.arange(min_points, n - min_points + 1)
    if not len(k):
        return at
    total = np.cumsum(values)
    cost = k * np.log(total[k - 1] / k) + (n - k) * np.log((total[-1] - total[k - 1]) / (n - k))
    best = start + int(k[int(np.argmin(cost))])
    return best if abs(best - at) <= window // 2 else at


def _normalised(samples: Sequence[Sequence[float] | None], at: npt.NDArray[np.intp]) -> FloatArray:
    """The samples of the points ``at``, each run's over its median (levels apart)."""
    chunks = []
    for i in at:
        values = np.asarray(samples[int(i)], dtype=np.float64)
        median = float(np.median(values))
        if median:
            chunks.append(values / median)
    return np.concatenate(chunks) if chunks else np.empty(0)


def _bounds(splits: list[int], n: int, window: int) -> list[tuple[int, tuple[int, int]]]:
    edges = [0, *splits, n]
    return [
        (split, (max(edges[i], split - window), min(edges[i + 2], split + window)))
        for i, split in enumerate(splits)
    ]


def _level_moved(left: FloatArray, right: FloatArray, movement: FloatArray) -> bool:
    """Whether the level moved by more than the points moved before: a step's business."""
    typical = float(np.median(movement))
    return abs(float(np.median(right)) - float(np.median(left))) > 2 * typical


def _judge(
    before: FloatArray,
    after: FloatArray,
    left: FloatArray,
    right: FloatArray,
    config: ShapeConfig,
) -> ChangePoint | None:
    """The shape change from spreads ``before`` to ``after`` (of values ``left``, ``right``).

    None unless the later spread is the larger by the rank test and it doubled, or the later
    values are bimodal where the earlier are not.
    """
    from scipy.stats import mannwhitneyu

    if np.ptp(np.concatenate([before, after])) == 0:
        return None
    p_value = float(mannwhitneyu(after, before, alternative="greater").pvalue)
    was, now = float(np.median(before)), float(np.median(after))
    split, level = modes(right, config), float(np.median(left))
    if (
        split is not None
        and split.interleaved(right)
        and modes(left, config) is None
        and split.keeps(level, was)
        and p_value <= config.max_p_value * BIMODAL_P_FACTOR
    ):
        kind = "bimodal"
    elif (
        p_value > config.max_p_value
        or _level_moved(left, right, before)
        or was <= 0
        or now < config.min_ratio * was
    ):
        return None
    else:
        kind = "noise"
    return ChangePoint(
        index=0,
        before=float(np.median(left)),
        after=float(np.median(right)),
        rel_change=now / was - 1 if was > 0 else float("inf"),
        p_value=p_value,
        before_spread=was,
        after_spread=now,
        kind=kind,
    )


def _with_levels(change: ChangePoint, left: FloatArray, right: FloatArray) -> ChangePoint:
    """The change with the levels of the points either side (not of normalised samples)."""
    return replace(change, before=float(np.median(left)), after=float(np.median(right)))


def modes(values: FloatArray, config: ShapeConfig = ShapeConfig()) -> Modes | None:
    """The two modes of ``values``, if they hold two (``core.modes.two_modes``); else None."""
    return two_modes(values, config.separation, config.min_share)


def _any_two_modes(points: FloatArray, config: ShapeConfig) -> bool:
    """Whether some ``window`` of the points (or the newest, if fewer) may hold two modes."""
    width = min(config.window, len(points))
    windows = np.lib.stride_tricks.sliding_window_view(points, width)
    found = best_splits(windows, config.min_share)
    return found is not None and bool(np.any(found[0] >= config.separation))
