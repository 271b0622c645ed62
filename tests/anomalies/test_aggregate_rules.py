"""The aggregate rules on values: no database."""

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from app.anomalies import aggregate_rules as rules
from app.anomalies.aggregate_rules import AggregateChanges, Candidate, Key, Value
from app.anomalies.models import AggregateFinding
from app.summaries.aggregates import ModelRecord

GROUP = ("torchbench", "cudagraphs", "amp", "inference")


def record(model: str, speedup: float | None, **fields: object) -> ModelRecord:
    return ModelRecord(*GROUP, model, speedup=speedup, **fields)  # type: ignore[arg-type]


def key(stat: str) -> Key:
    return (*GROUP, stat)


def judge(
    stat: str,
    values: list[float],
    known: list[AggregateFinding] | None = None,
    base: tuple[float, float] | None = None,
    steps: bool = True,
    models: int = 20,
) -> tuple[AggregateChanges, list[AggregateFinding]]:
    """Judge the last of ``values`` (run ids 1, 2, ...)."""
    known = [] if known is None else known
    judged = AggregateChanges()
    history = [(i + 1, v) for i, v in enumerate(values)]
    rules.judge_series(
        key(stat),
        history,
        base,
        known,
        judged,
        models=models,
        machine_id=1,
        channel="nightly",
        steps=steps,
    )
    return judged, known


def walk(stat: str, values: list[float]) -> list[AggregateFinding]:
    """Judge every run in turn, as detection after each run does; the findings."""
    known: list[AggregateFinding] = []
    for end in range(1, len(values) + 1):
        judge(stat, values[:end], known)
    return known


def test_stat_values_follow_the_dashboard_and_count_the_models_behind_each() -> None:
    records = [
        record("a", 2.0, accuracy="pass", compilation_latency=30.0, compression_ratio=1.5),
        record("b", 0.5, accuracy="pass", compilation_latency=10.0),
        record("c", 0.0, accuracy="pass"),  # failed to run: speedup 0
        record("d", 3.0, accuracy="fail_accuracy", compilation_latency=99.0),
    ]
    values = rules.stat_values(records)
    assert values == {
        key("pass_rate"): Value(0.5, 4),
        key("geomean_speedup"): Value(1.0, 2),
        key("mean_compile_time_s"): Value(20.0, 2),
        key("mean_compression_ratio"): Value(1.5, 1),
    }


def test_a_group_without_speedups_has_no_pass_rate() -> None:
    values = rules.stat_values([ModelRecord(*GROUP, "a", compilation_latency=5.0)])
    assert values == {}  # not passing either: no compile time of passing models
    accuracy_only = [ModelRecord(*GROUP, m, accuracy="pass") for m in ("a", "b")]
    assert rules.stat_values(accuracy_only) == {}


def test_base_values_compare_the_models_passing_in_both_runs() -> None:
    base = [record("a", 2.0), record("b", 2.0), record("fast", 8.0)]
    new = [record("a", 1.8), record("b", 2.0), record("fast", 0.0), record("new_slow", 0.5)]
    compared = rules.base_values(new, base)
    assert compared[key("geomean_speedup")] == pytest.approx((2.0, (1.8 * 2.0) ** 0.5))
    assert rules.stat_values(new)[key("geomean_speedup")].value < 1.3  # all models: far lower


def test_pass_rate_under_90_percent_after_a_run_at_or_above_opens_once() -> None:
    found = walk("pass_rate", [1.0, 0.95, 0.9, 0.85, 0.8, 0.8])
    assert [(f.rule, f.before, f.after, f.last_good_run_id, f.first_bad_run_id) for f in found] == [
        ("pass_rate_below", 0.9, 0.85, 3, 4)
    ]
    assert found[0].rel_change == pytest.approx(-0.05 / 0.9)


def test_a_pass_rate_one_model_under_90_percent_is_told_if_the_next_run_is_under_too() -> None:
    known: list[AggregateFinding] = []
    judged, _ = judge("pass_rate", [0.95, 0.9, 0.85], known, models=20)
    assert judged.opened == []  # one model of 20: wait for the next run
    judged, _ = judge("pass_rate", [0.95, 0.9, 0.85, 0.85], known, models=20)
    assert [(f.before, f.after, f.first_bad_run_id) for f in judged.opened] == [(0.9, 0.85, 3)]
    judged, _ = judge("pass_rate", [0.95, 0.9, 0.85, 0.85], known, models=20)
    assert judged.opened == []  # the same run again
    transient = [0.95, 0.9, 0.85, 0.9, 0.9]
    assert [f for end in range(1, 6) for f in judge("pass_rate", transient[:end])[1]] == []
    judged, _ = judge("pass_rate", [0.95, 0.9, 0.8], models=20)
    assert [f.first_bad_run_id for f in judged.opened] == [3]  # two models: at once


def test_pass_rate_already_below_or_rising_opens_nothing() -> None:
    assert walk("pass_rate", [0.8, 0.7, 0.75, 0.85]) == []
    assert walk("pass_rate", [0.85, 0.95, 1.0]) == []


def test_a_pass_rate_finding_ends_when_the_rate_is_back_at_90_percent() -> None:
    found = walk("pass_rate", [1.0, 1.0, 0.7, 0.8, 0.9, 0.7])
    assert [(f.first_bad_run_id, f.resolved_run_id) for f in found] == [(3, 5), (6, None)]


@pytest.mark.parametrize(
    ("stat", "rule", "fraction"),
    [
        ("geomean_speedup", "speedup_below_base", 0.95),
        ("mean_compression_ratio", "compression_below_base", 0.90),
    ],
)
def test_base_rules_fire_under_their_fraction_of_the_base_only(
    stat: str, rule: str, fraction: float
) -> None:
    judged, _ = judge(stat, [2.0, 1.0], base=(2.0, 2.0 * fraction * 0.999))
    assert [(f.rule, f.before) for f in judged.opened] == [(rule, 2.0)]
    judged, _ = judge(stat, [2.0, 1.0], base=(2.0, 2.0 * fraction))
    assert judged.opened == []  # at the threshold: not under it
    judged, _ = judge(stat, [2.0, 3.0], base=(2.0, 3.0))
    assert judged.opened == []  # better


def test_a_zero_base_has_no_relative_change_and_no_base_rule_fires() -> None:
    """comparison.relative_change's rule: before, a zero base was a relative change of 0."""
    judged, _ = judge("geomean_speedup", [0.0, -1.0], base=(0.0, -1.0))
    assert judged.opened == []
    assert rules.worse("mean_compile_time_s", None) is False
    with pytest.raises(AssertionError):
        _ = rules.AggregateMove("step", 0.0, 1.0, 1, 2).rel_change


def test_a_base_rule_finding_is_not_opened_again_while_open_and_ends_when_back() -> None:
    known: list[AggregateFinding] = []
    judge("geomean_speedup", [2.0, 1.5], known, base=(2.0, 1.5))
    judge("geomean_speedup", [2.0, 1.5], known, base=(2.0, 1.5))  # the same run again
    judge("geomean_speedup", [2.0, 1.5, 1.2], known, base=(1.5, 1.2))  # lower still: open
    assert len(known) == 1
    judge("geomean_speedup", [2.0, 1.5, 1.2, 1.91], known, base=(1.2, 1.91))
    assert known[0].resolved_run_id == 4


def test_compile_time_has_no_rule_but_a_step_up_is_a_regression() -> None:
    level = 40.0 * (1 + 0.002 * np.sin(np.arange(20)))
    up = [*level[:12], *(level[12:] * 1.2)]
    (found,) = walk("mean_compile_time_s", up)
    assert (found.rule, found.first_bad_run_id, found.last_good_run_id) == ("step", 13, 12)
    assert found.rel_change == pytest.approx(0.2, abs=0.01)
    assert walk("mean_compile_time_s", [*level[:12], *(level[12:] * 0.8)]) == []  # faster


def test_a_step_is_found_once_and_ends_past_its_middle() -> None:
    level = 1.5 * (1 + 0.002 * np.sin(np.arange(30)))
    values = [*level[:12], *(level[12:20] * 0.96), *level[20:]]
    (found,) = walk("geomean_speedup", values)
    assert found.rule == "step"
    assert found.first_bad_run_id in (12, 13)  # found early, its placement may be a point off
    assert found.resolved_run_id == 21


def test_a_step_where_a_rule_finding_is_adds_nothing() -> None:
    known: list[AggregateFinding] = []
    level = [1.5 + 0.001 * (i % 3) for i in range(20)]
    values = [*level[:10], *(v * 0.9 for v in level[10:])]
    for end in range(1, len(values) + 1):
        base = (values[end - 2], values[end - 1]) if end > 1 else None
        judge("geomean_speedup", values[:end], known, base=base)
    assert [(f.rule, f.first_bad_run_id) for f in known] == [("speedup_below_base", 11)]


def test_a_noisy_flat_aggregate_opens_nothing() -> None:
    rng = np.random.default_rng(7)
    values = list(1.5 * (1 + rng.normal(0, 0.005, 60)))
    assert walk("geomean_speedup", values) == []


def test_a_step_right_after_a_recovery_is_not_judged_recovered_too_soon() -> None:
    finding = AggregateFinding(rule="step", stat="geomean_speedup", before=2.0, after=1.6)
    assert not rules.recovered(finding, 1.95, rules.MIN_SEGMENT - 2)
    assert rules.recovered(finding, 1.81, rules.MIN_SEGMENT - 1)
    assert not rules.recovered(finding, 1.79, rules.MIN_SEGMENT)


def test_rescan_steps_resolve_where_the_aggregate_came_back() -> None:
    level = [2.0 + 0.002 * (i % 4) for i in range(40)]
    values = [*level[:15], *(v * 0.9 for v in level[15:25]), *level[25:]]
    history = [(i + 1, v) for i, v in enumerate(values)]
    judged, known = AggregateChanges(), list[AggregateFinding]()
    rules.rescan_steps(
        key("geomean_speedup"), history, known, judged, machine_id=1, channel="nightly"
    )
    assert [(f.first_bad_run_id, f.resolved_run_id) for f in judged.opened] == [(16, 26)]
    rules.rescan_steps(
        key("geomean_speedup"), history, known, judged, machine_id=1, channel="nightly"
    )
    assert len(judged.opened) == 1  # twice adds nothing


def test_explains_same_group_of_models_near_in_time_and_the_right_metric() -> None:
    at = datetime(2026, 1, 10, tzinfo=UTC)
    window = timedelta(hours=36)
    finding = AggregateFinding(
        stat="geomean_speedup",
        group_id=5,
        **dict(zip(("suite", "config", "precision", "mode"), GROUP, strict=True)),
    )

    def candidate(**changes: object) -> Candidate:
        fields: dict[str, object] = {
            "kind": "regressions", "id": 1, "group_id": 9, "group": GROUP,
            "metric": "speedup", "started_at": at + timedelta(hours=24),
        }  # fmt: skip
        return Candidate(**{**fields, **changes})  # type: ignore[arg-type]

    assert rules.explains(finding, at, candidate(), window)
    assert rules.explains(finding, at, candidate(kind="failures", metric=""), window)
    assert rules.explains(finding, at, candidate(group_id=5, started_at=at + 10 * window), window)
    assert not rules.explains(finding, at, candidate(started_at=at + 2 * window), window)
    assert not rules.explains(finding, at, candidate(metric="compilation_latency"), window)
    other = ("huggingface", *GROUP[1:])
    assert not rules.explains(finding, at, candidate(group=other), window)
