"""The dashboard aggregates, on records worked out by hand from PyTorch HUD's definitions."""

import pytest

from app.summaries.aggregates import ModelRecord, common_only, summarize


def record(
    model: str, speedup: float | None, accuracy: str | None, **metrics: float
) -> ModelRecord:
    return ModelRecord(
        "torchbench", "cudagraphs", "amp", "training", model, speedup, accuracy, **metrics
    )


HAND_WORKED = [
    record("a", 2.0, "pass", compilation_latency=40.0, compression_ratio=1.2, dynamo_peak_mem=10.0),
    record("b", 0.0, "pass", compilation_latency=0.0),  # passes accuracy, perf failed
    record("c", 1.5, "fail_accuracy", compilation_latency=99.0, compression_ratio=9.0),
    record("d", 0.0, "pass_due_to_skip"),  # counts as a pass even with speedup 0
    record(
        "e",
        0.5,
        "eager_variation",
        compilation_latency=20.0,
        compression_ratio=0.8,
        dynamo_peak_mem=30.0,
    ),
]


def test_hand_worked_group() -> None:
    (stats,) = summarize(HAND_WORKED).values()
    assert (stats.pass_count, stats.total_count) == (3, 5)
    assert stats.pass_rate == pytest.approx(0.6)
    assert stats.geomean_speedup == pytest.approx(1.0)  # sqrt(2.0 * 0.5); c and zeros out
    assert stats.mean_compile_time_s == pytest.approx(30.0)  # a and e; b's 0 and c excluded
    assert stats.mean_compression_ratio == pytest.approx(1.0)
    assert stats.mean_peak_memory_gb == pytest.approx(20.0)
    assert stats.mean_abs_latency_ms is None


def test_without_accuracy_a_measured_speedup_passes() -> None:
    (stats,) = summarize([record("a", 1.2, None), record("b", 0.0, None)]).values()
    assert (stats.pass_count, stats.total_count) == (1, 2)
    assert stats.geomean_speedup == pytest.approx(1.2)


def test_groups_are_separate_and_geomean_is_not_clipped() -> None:
    other = ModelRecord("huggingface", "dynamic", "bf16", "inference", "x", 0.25, "pass")
    groups = summarize([*HAND_WORKED, other])
    assert len(groups) == 2
    assert groups[("huggingface", "dynamic", "bf16", "inference")].geomean_speedup == 0.25


def test_common_only_keeps_models_in_both_runs() -> None:
    base = [record("a", 1.0, "pass"), record("b", 1.0, "pass")]
    new, old = common_only(HAND_WORKED, base)
    assert {r.model for r in new} == {"a", "b"} == {r.model for r in old}
