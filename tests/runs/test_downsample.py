"""Downsampling keeps both levels of a step, outliers and failures."""

from app.runs.downsample import downsample_indices


def test_short_series_are_kept_whole() -> None:
    assert downsample_indices([1.0, 2.0, None], 10) == [0, 1, 2]


def test_long_series_keep_extremes_edges_and_failures() -> None:
    values: list[float | None] = [float(i % 7) for i in range(10_000)]
    values[5_000] = 1_000.0
    values[7_777] = None
    values[0] = None
    keep = downsample_indices(values, 500)
    assert len(keep) <= 500
    assert keep == sorted(set(keep))
    assert {0, 5_000, 7_777, 9_999} <= set(keep)


def test_a_step_inside_one_bucket_keeps_both_levels() -> None:
    values: list[float | None] = [10.0] * 1003 + [20.0] * 997
    kept = {values[i] for i in downsample_indices(values, 10)}
    assert kept == {10.0, 20.0}
