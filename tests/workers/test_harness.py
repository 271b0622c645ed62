"""The harness on CPU: eager and compiled timings, accuracy, and honest skips and failures."""

import gc
from typing import Any

import pytest
import torch

from workers import harness
from workers.compile_configs import compile_options
from workers.harness import Case, Plan, _repeated, measure, scaled, spread
from workers.workloads.operators import OPERATORS

CPU = torch.device("cpu")
QUICK = Plan(repeats=5, warmup=1)
SOFTMAX = next(c for c in OPERATORS if c.model == "softmax")


def by_metric(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {row["metric"]: row for row in rows}


def test_eager_latency_throughput_and_accuracy() -> None:
    rows = by_metric(measure(SOFTMAX, "eager", "fp32", CPU, QUICK))
    assert len(rows["latency"]["samples"]) == 5
    assert rows["latency"]["value"] > 0
    assert rows["latency_p99"]["value"] >= rows["latency"]["value"]
    assert rows["throughput"]["value"] > 0
    assert rows["accuracy"]["text_value"] == "pass"
    assert rows["max_error"]["value"] == 0.0
    assert {r["config"] for r in rows.values()} == {"eager"}


def test_the_first_eager_call_is_timed_with_the_collector_paused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first eager call is what compilation_latency subtracts: a collection of a big heap
    landing in it (tens of milliseconds) once made a warm export's latency 0."""
    collecting: list[bool] = []
    timed = harness._timed

    def watched(*args: Any) -> Any:
        collecting.append(gc.isenabled())
        return timed(*args)

    monkeypatch.setattr(harness, "_timed", watched)
    measure(SOFTMAX, "eager", "fp32", CPU, QUICK)
    assert collecting[:2] == [False, True]  # the first call; the warm-up call after it
    assert collecting[2:] == [False] * 5  # the samples
    assert gc.isenabled()


def test_compiled_speedup_compile_time_and_graph_counters() -> None:
    rows = by_metric(measure(SOFTMAX, "default", "fp32", CPU, QUICK))
    assert rows["speedup"]["value"] > 0
    assert len(rows["speedup"]["samples"]) == 5
    assert rows["compilation_latency"]["value"] >= 0
    assert rows["unique_graphs"]["value"] == 1
    assert rows["graph_breaks"]["value"] == 0
    assert rows["accuracy"]["text_value"] == "pass"


@pytest.mark.parametrize("case", OPERATORS, ids=lambda c: c.model)
def test_every_operator_matches_its_reference(case: Case) -> None:
    for precision in ("fp32", "bf16"):
        rows = by_metric(measure(case, "eager", precision, CPU, Plan(repeats=1, warmup=0)))
        assert rows["accuracy"]["text_value"] == "pass", (precision, rows["max_error"])


def test_dynamic_shapes_compile_once_over_varying_batches() -> None:
    rows = by_metric(measure(SOFTMAX, "dynamic", "fp32", CPU, QUICK))
    assert rows["unique_graphs"]["value"] == 1
    assert rows["recompiles"]["value"] == 0
    assert rows["compilation_latency"]["value"] > 0
    assert rows["accuracy"]["text_value"] == "pass"
    bag = next(c for c in OPERATORS if c.model == "embedding_bag")
    skipped = measure(bag, "dynamic", "fp32", CPU, QUICK)
    assert {r["reason"] for r in skipped} == {"no batch dimension to vary for dynamic shapes"}


def test_bf16_is_checked_against_an_fp32_reference() -> None:
    rows = by_metric(measure(SOFTMAX, "eager", "bf16", CPU, QUICK))
    assert rows["accuracy"]["text_value"] == "pass"
    assert 0 < rows["max_error"]["value"] < 1e-2


@pytest.mark.parametrize(
    ("config", "precision", "reason"),
    [
        ("cudagraphs", "fp32", "CUDA/HIP graphs need a GPU"),
        ("max_autotune", "fp32", "max-autotune needs a GPU"),
        ("eager", "int8", "weight quantization applies to model cases"),
        ("eager", "int4", "weight quantization applies to model cases"),
    ],
)
def test_what_cannot_run_here_is_skipped_with_a_reason(
    config: str, precision: str, reason: str
) -> None:
    rows = measure(SOFTMAX, config, precision, CPU, QUICK)
    assert {r["status"] for r in rows} == {"skipped"}
    assert all(reason in r["reason"] for r in rows)


def test_a_crashing_case_fails_with_its_reason() -> None:
    def broken(device: torch.device, dtype: torch.dtype) -> Any:
        raise RuntimeError("CUDA out of memory. Tried to allocate 2 GiB")

    rows = by_metric(measure(Case("s", "broken", "operator", 1, broken), "eager", "fp32", CPU))
    assert rows["latency"]["status"] == "failed"
    assert "out of memory" in rows["latency"]["reason"]
    assert rows["accuracy"]["text_value"] == "OOM"


def test_nan_output_fails_accuracy() -> None:
    def nan(device: torch.device, dtype: torch.dtype) -> Any:
        return (lambda x: x / 0 * 0), (torch.ones(4, device=device, dtype=dtype),)

    rows = by_metric(measure(Case("s", "nan", "operator", 4, nan), "eager", "fp32", CPU, QUICK))
    assert rows["accuracy"]["text_value"] == "fail_accuracy"
    assert "NaN" in rows["accuracy"]["extra"]["why"]


def test_compiled_cases_report_peak_memory_and_compression_ratio() -> None:
    rows = by_metric(measure(SOFTMAX, "default", "fp32", CPU, QUICK))
    assert rows["peak_memory"]["value"] >= 64 * 1024 * 4 / 1e9  # the output at least
    ratio = rows["eager_peak_mem"]["value"] / rows["peak_memory"]["value"]
    assert rows["compression_ratio"]["value"] == pytest.approx(ratio)
    eager = by_metric(measure(SOFTMAX, "eager", "fp32", CPU, QUICK))
    assert eager["peak_memory"]["value"] > 0
    assert "compression_ratio" not in eager


def tiny_model(device: torch.device, dtype: torch.dtype) -> Any:
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    return model.to(device=device, dtype=dtype), (torch.randn(8, 16, device=device).to(dtype),)


TINY = Case("s", "tiny", "test", 8, tiny_model, None, training_reason=None)


def test_training_times_whole_steps_and_checks_the_first_loss() -> None:
    rows = by_metric(measure(TINY, "eager", "fp32", CPU, QUICK, mode="training"))
    assert {r["mode"] for r in rows.values()} == {"training"}
    assert rows["accuracy"]["text_value"] == "pass"
    assert rows["max_error"]["value"] == 0.0
    assert rows["peak_memory"]["value"] > 0
    assert len(rows["latency"]["samples"]) == 5


def test_amp_training_scales_the_loss(monkeypatch: pytest.MonkeyPatch) -> None:
    factors: list[float] = []

    class SpyScaler(torch.amp.GradScaler):
        def scale(self, outputs: Any) -> Any:
            result = super().scale(outputs)
            factors.append(float(result.detach()) / float(outputs.detach()))
            return result

    monkeypatch.setattr(torch.amp, "GradScaler", SpyScaler)
    rows = by_metric(measure(TINY, "eager", "amp", CPU, QUICK, mode="training"))
    assert rows["accuracy"]["text_value"] == "pass"
    scaled = [f for f in factors if f > 1]  # the fp32 reference step is not scaled
    assert len(scaled) >= QUICK.repeats
    factors.clear()
    measure(TINY, "eager", "fp32", CPU, QUICK, mode="training")
    assert factors
    assert set(factors) == {1.0}


def test_operators_and_int8_do_not_train_and_say_why() -> None:
    rows = measure(SOFTMAX, "eager", "fp32", CPU, QUICK, mode="training")
    assert {r["reason"] for r in rows} == {"training applies to model cases, not operators"}
    rows = measure(TINY, "eager", "int8", CPU, QUICK, mode="training")
    assert {r["reason"] for r in rows} == {"int8 weight quantization is for inference"}


def test_compiled_training_matches_eager() -> None:
    rows = by_metric(measure(TINY, "default", "fp32", CPU, QUICK, mode="training"))
    assert rows["accuracy"]["text_value"] == "pass"
    assert rows["speedup"]["value"] > 0
    assert rows["unique_graphs"]["value"] >= 1


def test_noisy_timings_are_repeated_until_stable_within_a_bound() -> None:
    noisy = iter([1.0, 5.0] * 100)
    rounds = _repeated(Plan(repeats=4, max_repeats=10), lambda: (next(noisy), 0.0))
    assert len(rounds) == 10  # never stable: stopped at the bound
    steady = _repeated(Plan(repeats=4, max_repeats=10), lambda: (2.0, 0.0))
    assert len(steady) == 4
    assert spread([10.0, 10.0, 10.0, 10.5, 100.0]) == 0.0  # one outlier does not count
    assert spread([1.0, 2.0, 3.0]) == pytest.approx(0.5)


def test_larger_tiers_scale_the_batch_by_repeating_the_batch_inputs() -> None:
    bigger = scaled(TINY, 4)
    assert bigger.batch_size == 32
    assert bigger.make is not None
    _, (x,) = bigger.make(CPU, torch.float32)
    assert x.shape == (32, 16)
    bag = next(c for c in OPERATORS if c.model == "embedding_bag")
    assert scaled(bag, 4) is bag  # no batch dimension to scale


@pytest.mark.parametrize(
    ("config", "device", "mode", "dynamic"),
    [
        ("default", "cuda", None, None),
        ("cudagraphs", "cuda", "reduce-overhead", None),
        ("dynamic", "cuda", "reduce-overhead", True),
        ("dynamic", "cpu", None, True),
        ("max_autotune", "cuda", "max-autotune", None),
        ("max_autotune_no_cudagraphs", "cuda", "max-autotune-no-cudagraphs", None),
    ],
)
def test_dashboard_configs_map_to_compile_options(
    config: str, device: str, mode: str | None, dynamic: bool | None
) -> None:
    options = compile_options(config, torch.device(device))
    assert options == {"mode": mode, "dynamic": dynamic}
