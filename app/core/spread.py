"""A result's within-run spread: its samples' median absolute deviation over their median.

One home for the statistic: ingest stores it beside each result with samples
(``Result.spread``), and detection reads it with the history (a float, where decoding every
point's samples would be the slow part). Pure Python: a run's samples are few.
"""

import math
from collections.abc import Sequence

MIN_SAMPLES = 3  # samples a result needs before its spread says anything


def _median(ordered: Sequence[float]) -> float:
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2


def relative_spread(samples: Sequence[float]) -> float | None:
    """The samples' median absolute deviation over their median.

    None with fewer than ``MIN_SAMPLES`` samples, or a median of 0 or not finite.
    """
    if len(samples) < MIN_SAMPLES:
        return None
    median = _median(sorted(samples))
    if median == 0 or not math.isfinite(median):
        return None
    return _median(sorted(abs(x - median) for x in samples)) / abs(median)
