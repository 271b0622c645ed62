"""Proposing steps: where a series may split, by the normalised CUSUM statistic.

Stage 1 of ``detectors``: binary segmentation (Scott & Knott 1974; Vostrikova 1981) on a
3-point running median of the series, so that an isolated outlier cannot create a proposal.
The statistic of a split at ``k`` of ``n`` points is ``sqrt(k (n - k) / n) * |mean_left -
mean_right| / sigma``, ``sigma`` the series' robust noise scale (``detectors.noise_scale``).
A segment without a split over ``PROPOSAL_THRESHOLD`` is searched again on its halves
(``best_split``). Nothing here judges a step: the tests of ``detectors`` do.
"""

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]
PROPOSAL_THRESHOLD = 4.0  # normalised CUSUM needed to propose a split
HALVES_THRESHOLD = 5.0  # ... in a half of a segment that has none


def running_median(points: FloatArray) -> FloatArray:
    """3-point running median (ends kept): removes isolated outliers, keeps step edges."""
    if len(points) < 3:
        return points.copy()
    stacked = np.vstack([points[:-2], points[1:-1], points[2:]])
    smoothed = points.copy()
    smoothed[1:-1] = np.median(stacked, axis=0)
    return smoothed


def binary_segmentation(points: FloatArray, sigma: float, min_segment: int) -> list[int]:
    """Split points (first index of each new segment), by the normalised CUSUM statistic."""
    splits: list[int] = []
    pending = [(0, len(points))]
    while pending:
        start, stop = pending.pop()
        split = best_split(points[start:stop], sigma, min_segment)
        if split is not None:
            splits.append(start + split)
            pending += [(start, start + split), (start + split, stop)]
    return sorted(splits)


def best_split(segment: FloatArray, sigma: float, min_segment: int) -> int | None:
    """The split of ``segment`` with the highest statistic, if it is over the threshold.

    Where the whole segment has none, its halves are searched, laid over it a quarter of it
    apart (seeded intervals of one length: Kovacs, Li, Haubner, Munk & Buhlmann 2023). A
    bump or dip over a part of the segment, two steps that undo each other, moves the means
    of the whole too little to be seen, and a half that holds one of its edges sees it. More
    searches are more chances for noise, hence their higher threshold.
    """
    n = len(segment)
    split, statistic = strongest_split(segment, sigma, min_segment)
    if statistic > PROPOSAL_THRESHOLD:
        return split
    half = n // 2
    count = 2 * -(-n // half) - 1 if half else 1  # 3, or 5 where n is odd
    starts = np.round(np.linspace(0, n - half, count)).astype(np.intp)
    split, statistic = strongest_split(segment, sigma, min_segment, half, starts)
    return split if statistic > HALVES_THRESHOLD else None


def strongest_split(
    segment: FloatArray,
    sigma: float,
    min_segment: int,
    length: int | None = None,
    starts: IntArray | None = None,
) -> tuple[int, float]:
    """The best split by the normalised CUSUM statistic, and the statistic.

    Searched within every interval of ``segment`` of ``length`` points from one of
    ``starts`` (by default the whole segment); (0, 0.0) where they are too short to split.
    """
    if length is None or starts is None:
        length, starts = len(segment), np.zeros(1, dtype=np.intp)
    if length < 2 * min_segment:
        return 0, 0.0
    cumulative = np.concatenate([[0.0], np.cumsum(segment)])
    k = np.arange(min_segment, length - min_segment + 1)
    left = cumulative[starts[:, None] + k] - cumulative[starts[:, None]]
    total = (cumulative[starts + length] - cumulative[starts])[:, None]
    gap = np.abs(left / k - (total - left) / (length - k))
    statistic = np.sqrt(k * (length - k) / length) * gap / sigma
    row, column = np.unravel_index(int(np.argmax(statistic)), statistic.shape)
    return int(starts[row] + k[column]), float(statistic[row, column])
