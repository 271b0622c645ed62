"""The one comparison rule: relative change, direction, verdicts at their thresholds, geomeans."""

import math
from typing import Any

import numpy as np
import pytest

from app.benchmarks import comparison as cmp
from app.benchmarks.comparison import Change, Geomean, Measurement, judge_samples


def ok(value: float | None, text: str | None = None) -> Measurement:
    return Measurement("ok", value, text)


FAILED = Measurement("failed", None)


def test_relative_change_is_against_the_absolute_base() -> None:
    assert cmp.relative_change(12.0, 10.0) == pytest.approx(0.2)
    assert cmp.relative_change(9.0, 10.0) == pytest.approx(-0.1)
    assert cmp.relative_change(-1.0, -2.0) == pytest.approx(0.5)  # up from a negative base
    assert cmp.relative_change(0.0, 4.0) == -1.0


@pytest.mark.parametrize(("new", "base"), [(1.0, None), (None, 1.0), (None, None), (1.0, 0.0)])
def test_no_relative_change_without_two_values_or_from_zero(
    new: float | None, base: float | None
) -> None:
    assert cmp.relative_change(new, base) is None


@pytest.mark.parametrize(
    ("rel", "higher_is_better", "expected"),
    [
        (0.2, True, "better"),
        (0.2, False, "worse"),
        (-0.2, True, "worse"),
        (-0.2, False, "better"),
        (1e-9, False, "worse"),  # no threshold: any move has a direction
        (0.0, True, None),
        (None, True, None),
        (0.2, None, None),
    ],
)
def test_direction(rel: float | None, higher_is_better: bool | None, expected: str | None) -> None:
    assert cmp.direction(rel, higher_is_better) == expected


def test_thresholds_are_pytorchs() -> None:
    assert cmp.threshold_for() == cmp.RELATIVE == 0.05
    assert cmp.threshold_for(memory=True) == cmp.RELATIVE_MEMORY == 0.20


@pytest.mark.parametrize(
    ("base", "new", "higher_is_better", "expected"),
    [
        (100.0, 105.0, False, "unchanged"),  # exactly 5% is within the threshold
        (100.0, 95.0, True, "unchanged"),
        (100.0, 105.01, False, "worse"),  # just beyond it
        (100.0, 94.99, True, "worse"),
        (100.0, 94.99, False, "better"),
        (100.0, 150.0, None, "changed"),  # moved, but neither way is better
        (100.0, 101.0, None, "unchanged"),
        (0.0, 0.0, True, "unchanged"),  # no relative change from zero: equal or not
        (0.0, 3.0, True, "changed"),
        (None, None, True, "unchanged"),
        (None, 3.0, True, "changed"),
    ],
)
def test_verdict_on_two_numbers(
    base: float | None, new: float | None, higher_is_better: bool | None, expected: str
) -> None:
    assert cmp.judge_values(base, new, higher_is_better).verdict == expected


def test_memory_threshold_is_wider() -> None:
    memory = cmp.threshold_for(memory=True)
    assert cmp.judge_values(1.0, 1.15, True).verdict == "better"
    assert cmp.judge_values(1.0, 1.15, True, memory) == Change(pytest.approx(0.15), "unchanged")
    assert cmp.judge_values(1.0, 1.20, True, memory).verdict == "unchanged"  # at the boundary
    assert cmp.judge_values(1.0, 0.79, True, memory).verdict == "worse"


@pytest.mark.parametrize(
    ("base", "new", "expected"),
    [
        (None, ok(1.0), Change(None, "new")),
        (ok(1.0), None, Change(None, "missing")),
        (ok(1.0), FAILED, Change(None, "now_fails")),
        (FAILED, ok(1.0), Change(None, "now_passes")),
        (FAILED, Measurement("skipped", None), Change(None, "failing")),
        (ok(None, "x"), ok(None, "x"), Change(None, "unchanged")),
        (ok(None, "x"), ok(None, "y"), Change(None, "changed")),
        (ok(10.0), ok(12.0), Change(pytest.approx(0.2), "worse")),
    ],
)
def test_verdict_on_statuses(
    base: Measurement | None, new: Measurement | None, expected: Change
) -> None:
    assert cmp.judge(base, new, higher_is_better=False) == expected


def test_accuracy_text_decides_passing() -> None:
    judged = cmp.judge(ok(None, "pass"), ok(None, "fail_accuracy"), True, accuracy=True)
    assert judged == Change(None, "now_fails")
    back = cmp.judge(ok(None, "fail_accuracy"), ok(None, "eager_variation"), True, accuracy=True)
    assert back.verdict == "now_passes"
    both_pass = cmp.judge(ok(None, "pass"), ok(None, "pass_due_to_skip"), True, accuracy=True)
    assert both_pass.verdict == "changed"  # another word, still passing
    assert cmp.judge(ok(None, "pass"), ok(None, "fail_accuracy"), True).verdict == "changed"


def row(**fields: Any) -> dict[str, Any]:
    base = {
        "suite": "torchbench",
        "model": "bert",
        "mode": "inference",
        "precision": "bf16",
        "config": "dynamic",
        "batch_size": None,
        "params": {},
        "metric": "latency",
        "higher_is_better": False,
        "status": "ok",
        "value": 10.0,
        "text_value": None,
    }
    return base | fields


def test_rows_are_judged_by_their_metric() -> None:
    assert cmp.judge_rows(row(), row(value=11.0)) == Change(pytest.approx(0.1), "worse")
    assert cmp.judge_rows(row(), row(value=11.0), 0.2).verdict == "unchanged"
    assert cmp.judge_rows(None, row()).verdict == "new"
    assert cmp.judge_rows(row(), None).verdict == "missing"
    accuracy = {"metric": "accuracy", "value": None, "higher_is_better": True}
    flipped = cmp.judge_rows(row(**accuracy, text_value="pass"), row(**accuracy, text_value="x"))
    assert flipped.verdict == "now_fails"


def test_case_keys_tell_batch_sizes_and_params_apart() -> None:
    keys = {
        cmp.case_key(row(batch_size=8)),
        cmp.case_key(row(batch_size=16)),
        cmp.case_key(row(params={"b": 1, "a": 2})),
        cmp.case_key(row(params={"a": 2, "b": 1})),  # the same params
    }
    assert len(keys) == 3
    assert cmp.case_key(row(config="default"), config=False) == cmp.case_key(row(), config=False)
    assert cmp.case_key(row(config="default")) != cmp.case_key(row())


def test_case_order_copes_with_a_missing_batch_size() -> None:
    keys = [
        cmp.case_key(row(model=m, batch_size=b)) for m, b in (("b", 8), ("a", None), ("b", None))
    ]
    assert [(k[0].model, k[0].batch_size) for k in cmp.in_order(keys)] == [
        ("a", None),
        ("b", 8),
        ("b", None),
    ]


def test_geomean() -> None:
    assert cmp.geomean([]) is None
    assert cmp.geomean([4.0, 1.0]) == pytest.approx(2.0)
    assert cmp.geomean(iter([2.0, 0.5])) == pytest.approx(1.0)
    assert math.isclose(cmp.geomean([1e-3, 1e3]) or 0, 1.0)


def test_geomean_ratio_counts_cases_positive_on_both_sides() -> None:
    pairs = [(10.0, 12.0), (10.0, 7.5), (None, 3.0), (2.0, None), (0.0, 1.0), (1.0, 0.0)]
    found = cmp.geomean_ratio(pairs, higher_is_better=False)
    assert found == Geomean(pytest.approx(math.sqrt(1.2 * 0.75)), 2, "better")
    assert cmp.geomean_ratio(pairs, higher_is_better=True).direction == "worse"
    assert cmp.geomean_ratio(pairs, higher_is_better=None).direction is None
    assert cmp.geomean_ratio([(2.0, 2.0)], True) == Geomean(1.0, 1, None)  # no move, no word
    assert cmp.geomean_ratio([], True) == Geomean(None, 0, None)


# --- How sure a case is, from its samples (issue 31, point 1) ---


def noisy(level: float, count: int, spread: float = 0.01, seed: int = 0) -> list[float]:
    """Samples about ``level``: the same draw for the same arguments, in any test order."""
    rng = np.random.default_rng([int(level * 1000), count, int(spread * 1000), seed])
    return list(level * rng.lognormal(0, spread, count))


def test_a_clear_slowdown_with_enough_samples_is_worse() -> None:
    found = judge_samples(noisy(10, 20), noisy(11, 20), higher_is_better=False)
    assert found is not None
    assert found.verdict == "worse"
    assert not found.needs_more
    assert found.interval[0] > 1.05
    assert found.p_value < 1e-4
    assert found.cliffs_delta == 1.0
    assert found.samples == (20, 20)


def test_a_speedup_of_a_throughput_is_better() -> None:
    found = judge_samples(noisy(100, 20), noisy(120, 20), higher_is_better=True)
    assert found is not None
    assert found.verdict == "better"


def test_no_move_with_a_tight_interval_is_the_same() -> None:
    found = judge_samples(noisy(10, 30, 0.005), noisy(10, 30, 0.005, 1), higher_is_better=False)
    assert found is not None
    assert found.verdict == "same"
    assert 0.95 <= found.interval[0] <= found.interval[1] <= 1.05


def test_three_samples_a_side_cannot_decide_and_need_more_runs() -> None:
    found = judge_samples([10.0, 10.1, 10.2], [11.0, 11.1, 11.2], higher_is_better=False)
    assert found is not None
    assert found.verdict == "unsure"  # a rank test of 3 against 3 never gets under p = 0.1
    assert found.needs_more
    assert "too few" in found.reason


def test_a_noisy_case_whose_interval_spans_the_threshold_is_unsure() -> None:
    found = judge_samples(noisy(10, 8, 0.15, 1), noisy(10.6, 8, 0.15, 11), higher_is_better=False)
    assert found is not None
    assert found.verdict == "unsure"
    assert found.needs_more
    assert found.interval[0] < 1.05 < found.interval[1]


def test_a_value_alone_is_one_sample_and_no_side_of_zero_is_judged() -> None:
    found = judge_samples([10.0], [12.0], higher_is_better=False)
    assert found is not None
    assert (found.verdict, found.needs_more, found.samples) == ("unsure", True, (1, 1))
    assert judge_samples([0.0, 1.0], [1.0], higher_is_better=False) is None
    assert judge_samples([], [1.0], higher_is_better=False) is None


def test_samples_on_two_modes_are_named_bimodal() -> None:
    two = noisy(10, 20, 0.005) + noisy(13, 12, 0.005)
    found = judge_samples(noisy(10, 32, 0.005, 1), two, higher_is_better=False)
    assert found is not None
    assert found.bimodal == ("new",)


def test_a_metric_with_no_better_way_changed() -> None:
    found = judge_samples(noisy(10, 20), noisy(12, 20), higher_is_better=None)
    assert found is not None
    assert found.verdict == "changed"
