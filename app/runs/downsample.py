"""Thin a long series for drawing without hiding its steps or its failures.

M4-style bucketing (Jugel et al., "M4: A Visualization-Oriented Time Series Data Aggregation",
VLDB 2014): the points are cut into equal-count buckets and each bucket keeps its first, last,
lowest and highest values, so a level shift stays visible at both of its levels and an outlier
is never averaged away. A bucket also keeps its first point that is not ``ok`` (a failure).
"""

from collections.abc import Sequence

POINTS_PER_BUCKET = 5  # first, last, min, max, first failure


def downsample_indices(values: Sequence[float | None], max_points: int) -> list[int]:
    """Indices (ascending) of the points to keep; all of them when there are few enough."""
    count = len(values)
    if count <= max_points:
        return list(range(count))
    buckets = max(1, max_points // POINTS_PER_BUCKET)
    keep: set[int] = set()
    for bucket in range(buckets):
        start, stop = bucket * count // buckets, (bucket + 1) * count // buckets
        keep.update((start, stop - 1))
        measured = [i for i in range(start, stop) if values[i] is not None]
        if measured:
            keep.add(min(measured, key=lambda i: values[i]))  # type: ignore[arg-type,return-value]
            keep.add(max(measured, key=lambda i: values[i]))  # type: ignore[arg-type,return-value]
        failed = next((i for i in range(start, stop) if values[i] is None), None)
        if failed is not None:
            keep.add(failed)
    return sorted(keep)
