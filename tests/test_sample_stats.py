"""The compare's statistics against scipy on known samples, and their intervals' coverage on
simulated data at the nominal level."""

import numpy as np
import pytest
from scipy.stats import bootstrap, mannwhitneyu

from app.core.modes import two_modes
from app.core.sample_stats import (
    cliffs_delta,
    geomean_interval,
    least_p_value,
    median_ratio_interval,
    rank_p_value,
)

KNOWN = [  # base, new: with ties, without, of unequal sizes
    ([1.0, 2.0, 3.0, 4.0, 5.0], [3.0, 4.0, 5.0, 6.0, 7.0]),
    ([10.1, 10.2, 10.2, 10.4, 10.3, 10.2], [10.6, 10.7, 10.2, 10.9]),
    ([4.2, 4.21, 4.25], [4.4, 4.41, 4.39, 4.5, 4.45, 4.42, 4.38]),
]


@pytest.mark.parametrize(("base", "new"), KNOWN)
def test_the_rank_test_is_scipys_two_sided_mann_whitney(
    base: list[float], new: list[float]
) -> None:
    expected = mannwhitneyu(base, new, alternative="two-sided").pvalue
    assert rank_p_value(base, new) == pytest.approx(expected)


def test_equal_values_or_an_empty_side_give_no_evidence() -> None:
    assert rank_p_value([3.0, 3.0], [3.0, 3.0, 3.0]) == 1.0
    assert rank_p_value([], [1.0]) == 1.0
    assert cliffs_delta([], [1.0]) == 0.0


def test_the_least_p_value_is_that_of_complete_separation() -> None:
    assert least_p_value(3, 3) == pytest.approx(0.1)  # 2 / C(6, 3)
    assert least_p_value(5, 5) == pytest.approx(2 / 252)
    separated = mannwhitneyu([1, 2, 3, 4, 5], [6, 7, 8, 9, 10], method="exact").pvalue
    assert least_p_value(5, 5) == pytest.approx(separated)


@pytest.mark.parametrize(("base", "new"), KNOWN)
def test_cliffs_delta_is_the_u_statistic_rescaled(base: list[float], new: list[float]) -> None:
    u_new = mannwhitneyu(new, base, alternative="two-sided").statistic  # ties count a half
    ties = sum(n == b for n in new for b in base)
    # delta = (#new > base - #new < base) / (n m); U = #new > base + ties / 2
    expected = (2 * (u_new - ties / 2) + ties - len(base) * len(new)) / (len(base) * len(new))
    assert cliffs_delta(base, new) == pytest.approx(expected)


def test_cliffs_delta_by_hand() -> None:
    assert cliffs_delta([1.0, 2.0], [3.0, 4.0]) == 1.0
    assert cliffs_delta([3.0, 4.0], [1.0, 2.0]) == -1.0
    assert cliffs_delta([1.0, 3.0], [2.0, 2.0]) == 0.0  # each new value between: one up, one down


def test_the_median_ratio_interval_agrees_with_scipys_percentile_bootstrap() -> None:
    rng = np.random.default_rng(3)
    base, new = rng.lognormal(0, 0.05, 40), rng.lognormal(0.1, 0.05, 40)
    low, high = median_ratio_interval(base, new)
    found = bootstrap(
        (base, new),
        lambda b, n, axis: np.median(n, axis=axis) / np.median(b, axis=axis),
        method="percentile",
        n_resamples=4000,
        random_state=1,
    ).confidence_interval
    assert low == pytest.approx(found.low, abs=0.01)
    assert high == pytest.approx(found.high, abs=0.01)
    assert low < np.median(new) / np.median(base) < high


def test_the_interval_covers_the_true_ratio_at_about_its_nominal_level() -> None:
    """200 simulated cases of 30 samples a side, a true ratio of medians of 1.05."""
    rng = np.random.default_rng(7)
    covered = 0
    for _ in range(200):
        base = 100 * rng.lognormal(0, 0.03, 30)
        new = 105 * rng.lognormal(0, 0.03, 30)
        low, high = median_ratio_interval(base, new, resamples=500)
        covered += low <= 1.05 <= high
    assert 0.88 <= covered / 200 <= 0.995, covered


def test_the_geomean_interval_covers_the_true_geomean() -> None:
    """100 simulated comparisons of 5 cases whose true ratios' geomean is known."""
    rng = np.random.default_rng(11)
    ratios = np.array([1.0, 1.1, 0.95, 1.2, 1.02])
    truth = float(np.exp(np.log(ratios).mean()))
    covered = 0
    for _ in range(100):
        cases = [
            (10 * rng.lognormal(0, 0.04, 20), 10 * r * rng.lognormal(0, 0.04, 20)) for r in ratios
        ]
        found = geomean_interval(cases, resamples=400)
        assert found is not None
        covered += found[0] <= truth <= found[1]
    assert 0.85 <= covered / 100 <= 1.0, covered
    assert geomean_interval([]) is None


def test_a_ratio_needs_positive_samples() -> None:
    with pytest.raises(ValueError, match="positive"):
        median_ratio_interval([0.0, 1.0], [1.0])


def test_two_modes_are_found_where_clocks_switch_and_not_in_plain_noise() -> None:
    rng = np.random.default_rng(5)
    switching = np.concatenate([rng.normal(10, 0.1, 20), rng.normal(12, 0.1, 12)])
    assert two_modes(switching) is not None
    assert two_modes(rng.normal(10, 0.1, 32)) is None
