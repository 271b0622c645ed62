"""Shape changes on constructed series: noise that rises, modes that split, and look-alikes."""

import numpy as np
import pytest

from app.anomalies.detectors import find_change_points
from app.anomalies.shapes import ShapeConfig, find_shape_changes, modes

Found = tuple[str, int]  # a shape change's kind and first point


def gauss(seed: int, n: int, sd: float = 1.0) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, sd, n)


def shapes_of(
    values: np.ndarray, samples: list[list[float]] | None = None
) -> list[tuple[str, int]]:
    steps = [c.index for c in find_change_points(values, samples=samples)]
    found = find_shape_changes(values, samples=samples, steps=steps)
    return [(c.kind, c.index) for c in found]


@pytest.mark.parametrize("seed", range(8))
def test_noise_four_times_larger_is_found_where_it_starts(seed: int) -> None:
    values = 100 + np.concatenate([gauss(seed, 50, 0.5), gauss(seed + 100, 40, 2.0)])
    ((kind, at),) = shapes_of(values)
    assert kind == "noise"
    assert abs(at - 50) <= 8  # a few quiet draws of the new noise can hide where it began
    (change,) = find_shape_changes(values)
    assert change.after_spread > 2 * change.before_spread
    assert change.before == pytest.approx(100, abs=0.5)  # the level stayed
    assert change.p_value <= ShapeConfig().max_p_value


@pytest.mark.parametrize("seed", range(8))
def test_points_that_split_into_two_modes_are_bimodal(seed: int) -> None:
    # From point 50 on, a third of the runs pick the other kernel: 8% slower, at 1% noise.
    rng = np.random.default_rng(seed)
    other = np.arange(90) >= 50
    other &= rng.random(90) < 0.35
    values = 100 * (1 + 0.08 * other) * (1 + 0.01 * rng.standard_normal(90))
    ((kind, at),) = shapes_of(values)
    assert kind == "bimodal"
    first = int(np.argmax(other))  # no run before the first on the new mode can be told apart
    assert abs(at - first) <= 2


@pytest.mark.parametrize("seed", range(12))
def test_look_alikes_are_no_shape_change(seed: int) -> None:
    rng = np.random.default_rng(seed)
    flat = 100 + rng.standard_t(3, 90) / np.sqrt(3)
    steady_modes = 100 * (1 + 0.08 * (rng.random(90) < 0.3)) * (1 + 0.01 * rng.standard_normal(90))
    step = 100 + gauss(seed, 90)
    step[45:] += 8  # a step: the step detector's, not a shape change
    for values in (flat, steady_modes, step):
        assert shapes_of(values) == []


def test_samples_that_scatter_more_within_runs_are_a_noise_change() -> None:
    rng = np.random.default_rng(5)
    spread = np.where(np.arange(60) < 30, 0.005, 0.02)
    samples = [list(100 * (1 + s * rng.standard_normal(20))) for s in spread]
    values = np.array([np.median(s) for s in samples])
    found = find_shape_changes(values, samples=samples)
    assert [(c.kind, abs(c.index - 30) <= 5) for c in found] == [("noise", True)]
    assert find_shape_changes(values) == []  # the points alone do not show it


def test_a_spread_that_falls_is_not_reported() -> None:
    values = 100 + np.concatenate([gauss(1, 50, 1.5), gauss(2, 40, 0.5)])
    assert find_shape_changes(values) == []


def test_modes() -> None:
    rng = np.random.default_rng(2)
    two = np.concatenate([rng.normal(0, 1, 20), rng.normal(10, 1, 10)])
    found = modes(two)
    assert found is not None
    assert (round(found.low), round(found.high)) == (0, 10)
    assert found.upper_share == pytest.approx(1 / 3)
    assert modes(rng.normal(0, 1, 30)) is None
    assert modes(np.array([1.0, 2.0])) is None  # too few to hold two
