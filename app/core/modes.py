"""Two modes in a set of values: the best split of them, and whether it is two modes.

GPUs give values on two levels (the autotuner picking one kernel or another, clocks switching
between two states): the shape detector looks for them along a series
(``app.anomalies.shapes``), a comparison among a case's samples. Pure numpy, no domain.
"""

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
MIN_MODE_POINTS = 4  # the fewest points a mode holds: fewer are outliers
MIN_CROSSINGS = 3  # two modes alternate: the points cross between them this often
SEPARATION = 4.0  # two modes: their means this many pooled sd apart ...
MIN_SHARE = 0.15  # ... and the smaller holds this share of the values


@dataclass(frozen=True)
class Modes:
    """The best two-mode reading of some values: the modes' means, sd and the upper share."""

    low: float
    high: float
    spread: float
    upper_share: float
    separation: float

    def interleaved(self, values: FloatArray) -> bool:
        """Whether ``values`` (in time order) cross between the modes as drawn modes do.

        Two modes drawn from run to run alternate, in both halves of the window, at least
        half as often as modes drawn at random would; two levels one after the other (a step
        inside the window, or levels that take turns for days) cross once or a few times,
        and a half of the window may hold one of them only.
        """
        upper = values > (self.low + self.high) / 2
        share = float(upper.mean())
        expected = 2 * share * (1 - share) * (len(values) - 1)  # of modes drawn at random
        crossings = int(np.count_nonzero(upper[1:] != upper[:-1]))
        if crossings < max(MIN_CROSSINGS, expected / 2):
            return False
        halves = upper[: len(upper) // 2], upper[len(upper) // 2 :]
        return all(half.any() and not half.all() for half in halves)

    def new_mode(self, values: FloatArray, level: float) -> npt.NDArray[np.bool_]:
        """Which of ``values`` lie on the mode further from ``level`` (past the midpoint)."""
        middle = (self.low + self.high) / 2
        return (
            values > middle if abs(self.high - level) > abs(self.low - level) else values < middle
        )

    def keeps(self, level: float, movement: float) -> bool:
        """Whether one of the modes is ``level``, within twice the typical ``movement``."""
        return min(abs(self.low - level), abs(self.high - level)) <= 2 * movement


def two_modes(
    values: npt.ArrayLike, separation: float = SEPARATION, min_share: float = MIN_SHARE
) -> Modes | None:
    """The two modes of ``values``, if they hold two; else None.

    The best split of the sorted values is the one whose two sides' means are furthest apart
    in pooled standard deviations, each side holding at least ``min_share`` of the values (and
    ``MIN_MODE_POINTS``); they are two modes when that is ``separation`` or more.
    """
    found = best_splits(np.asarray(values, dtype=np.float64)[None, :], min_share)
    if found is None or found[0][0] < separation:
        return None
    separation, low, high, sd, upper_share = (float(column[0]) for column in found)
    return Modes(low, high, sd, upper_share, separation)


def best_splits(
    rows: FloatArray, min_share: float = MIN_SHARE
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray] | None:
    """Per row of values, its best two-mode split: separation, low and high means, sd, share.

    All rows at once (a sort and two cumulative sums along the rows), so that every window of
    a series is read in one pass; None when the rows are too short to hold two modes.
    """
    ordered = np.sort(rows, axis=1)
    n = ordered.shape[1]
    least = max(MIN_MODE_POINTS, int(np.ceil(min_share * n)))
    if n < 2 * least:
        return None
    k = np.arange(least, n - least + 1)
    total, squares = np.cumsum(ordered, axis=1), np.cumsum(ordered**2, axis=1)
    low_mean = total[:, k - 1] / k
    high_mean = (total[:, -1:] - total[:, k - 1]) / (n - k)
    within = (squares[:, k - 1] - k * low_mean**2) + (
        (squares[:, -1:] - squares[:, k - 1]) - (n - k) * high_mean**2
    )
    sd = np.sqrt(np.maximum(within, 0.0) / (n - 2))
    gap = high_mean - low_mean
    separation = np.where(sd > 0, gap / np.where(sd > 0, sd, 1.0), np.where(gap > 0, np.inf, 0))
    best = np.argmax(separation, axis=1)
    rows_at = np.arange(len(rows))
    return (
        separation[rows_at, best],
        low_mean[rows_at, best],
        high_mean[rows_at, best],
        sd[rows_at, best],
        (n - k[best]) / n,
    )
