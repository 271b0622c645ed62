"""Measure one case the way PyTorch's benchmark harness does, and say it as result rows.

Per case: warm-up, then eager and compiled calls interleaved (so drift hits both alike),
device synchronisation around each timed call, medians. Figures: latency samples and
p50/p90/p99 (ms), throughput, speedup vs eager (median eager / median compiled), compile time
(first compiled call minus first eager call, as ``benchmarks/dynamo`` defines
``compilation_latency``), accuracy against an fp32 eager reference (max error, NaN/Inf), and
dynamo's graph counters, and peak memory with its compression ratio vs eager; a compiled
latency row keeps in ``extra.compiler_settings`` the compiler settings it compiled under
that are not torch's defaults (``workers.compiler_settings``: the config's own options, the
changed config values, the ``TORCHINDUCTOR_*`` variables). Training runs a whole step
(forward, loss, backward, SGD update; AMP with a GradScaler's loss scaling) and checks the
first step's loss. Beside the timings: hardware samples taken while the timed
calls run (``workers.sampler``) and kernel figures from torch.profiler (``workers.profiling``).
What cannot run here becomes a ``skipped`` row with the reason.
"""

import gc
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
import torch

from app.suite_runs.rows import PROFILE, failed_rows, skipped_rows
from workers.compile_configs import (
    GPU_ONLY,
    INFERENCE_ONLY,
    compiled,
    graphs_label,
    inductor_options,
    kernels_named,
)
from workers.compiler_settings import recorded_settings
from workers.inductor_code import captured_code, kernels_of
from workers.memory import peak_memory_gb
from workers.profiling import profile_rows
from workers.quantize import QUANTIZED, has_torchao, method, quantized, unsupported
from workers.sampler import HardwareSampler

Fn = Callable[..., torch.Tensor]
Mode = Literal["inference", "training"]
ONLY_MEASURED = ("eager", "fp32", "inference")
# Allowed max error, times the reference's max |value|.
TOLERANCE = {"fp32": 1e-4, "bf16": 5e-2, "amp": 5e-2, "fp16": 1e-2, "int8": 1e-1, "int4": 0.25}


@dataclass(frozen=True)
class Case:
    """One measured case: a function and its inputs, made for a device and dtype."""

    suite: str
    model: str
    category: str
    batch_size: int
    # The function and its inputs, for a device and dtype; None for a case that measures
    # itself (``measured_by``).
    make: Callable[[torch.device, torch.dtype], tuple[Fn, tuple[torch.Tensor, ...]]] | None
    # Why int8 and int4 weight quantization cannot run; None: they can (workers.quantize).
    quantization_reason: str | None = "weight quantization applies to model cases, not operators"
    # Why torch's own int8 dynamic quantization (the fallback without torchao) cannot run.
    ao_int8_reason: str | None = None
    # Which inputs carry the batch dimension (dim 0), varied under the ``dynamic`` config;
    # empty: the case has no batch dimension to vary.
    batch_args: tuple[int, ...] = (0,)
    # Why a training step cannot run; None: ``make`` returns a module whose output is a loss's
    # input (floating point, differentiable).
    training_reason: str | None = "training applies to model cases, not operators"
    # A case with its own measurement (all-reduce across processes): eager fp32 inference only.
    measured_by: Callable[[torch.device, "Plan"], list[dict[str, Any]]] | None = None
    # The allowed error, times the precision's ``TOLERANCE``: a deep model whose compiled
    # kernels sum in another order (benchmarks/dynamo keeps per-model tolerances too).
    tolerance_scale: float = 1.0


@dataclass(frozen=True)
class Plan:
    """How to measure: warm-up calls, then repetitions until the timings are stable.

    After ``repeats`` timed calls, more are made (half as many again each round) while the
    samples' robust spread (MAD / median) exceeds ``target_spread``, up to ``max_repeats``.
    The garbage collector is paused during the timed calls and the first eager call
    (``quiet_gc``), so a collection does not land in one sample, nor in the eager time that
    ``compilation_latency`` subtracts from the first compiled call's (a compilation's own
    collections are its cost).
    """

    repeats: int = 20
    warmup: int = 3
    max_repeats: int = 0  # 0: exactly ``repeats``
    target_spread: float = 0.05
    quiet_gc: bool = True


def _timed(
    fn: Fn, args: Sequence[torch.Tensor], device: torch.device
) -> tuple[float, torch.Tensor]:
    """Milliseconds of one call: device events on a GPU, the host clock on a CPU."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        start.record()
        out = fn(*args)
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end)), out
    began = time.perf_counter()
    out = fn(*args)
    return (time.perf_counter() - began) * 1000.0, out


def measure(
    case: Case,
    config: str,
    precision: str,
    device: torch.device,
    plan: Plan = Plan(),
    mode: Mode = "inference",
) -> list[dict[str, Any]]:
    """Result rows (native payload) of one case under one config, precision and mode."""
    ident = identity(case, config, precision, mode)
    reason = _skip_reason(case, config, precision, device, mode)
    if reason is not None:
        return skipped_rows(ident, reason)
    try:
        if case.measured_by is not None:
            rows = case.measured_by(device, plan)
        else:
            rows = _measure(case, config, precision, device, plan, mode)
    except Exception as exc:  # the case failed to run: say so, keep the rest of the suite
        return failed_rows(ident, f"{type(exc).__name__}: {exc}")
    labels = graphs_label(config)
    if precision in QUANTIZED:
        labels["quantization"] = method(precision, device)
    return [{**ident, **_labelled(row, labels)} for row in rows]


def _labelled(row: dict[str, Any], labels: dict[str, Any]) -> dict[str, Any]:
    """The latency row with how it was measured (quantization method, HIP graphs)."""
    if row["metric"] != "latency" or not labels:
        return row
    return {**row, "extra": {**row.get("extra", {}), **labels}}


def identity(case: Case, config: str, precision: str, mode: Mode) -> dict[str, Any]:
    """The fields that name one measured benchmark in the native payload (CASE_IDENTITY)."""
    return {
        "suite": case.suite,
        "model": case.model,
        "category": case.category,
        "mode": mode,
        "precision": precision,
        "config": config,
        "batch_size": case.batch_size,
    }


def _skip_reason(
    case: Case, config: str, precision: str, device: torch.device, mode: Mode
) -> str | None:
    if case.measured_by is not None and (config, precision, mode) != ONLY_MEASURED:
        return f"{case.model} is measured in eager fp32 inference only"
    if device.type == "cpu" and config in GPU_ONLY:
        return GPU_ONLY[config]
    if mode == "training" and case.training_reason is not None:
        return case.training_reason
    if mode == "training" and config in INFERENCE_ONLY:
        return INFERENCE_ONLY[config]
    if precision in QUANTIZED and (reason := _quantization_skip(case, precision, device, mode)):
        return reason
    if config == "dynamic" and not case.batch_args:
        return "no batch dimension to vary for dynamic shapes"
    if precision == "fp16" and device.type == "cpu":
        return "fp16 is not a CPU precision here; amp uses bf16 on CPU"
    return None


def _quantization_skip(case: Case, precision: str, device: torch.device, mode: Mode) -> str | None:
    if mode == "training":
        return f"{precision} weight quantization is for inference"
    if case.quantization_reason is not None:
        return case.quantization_reason
    if (reason := unsupported(precision, device)) is not None:
        return reason
    return case.ao_int8_reason if not has_torchao() else None


def _dtype_and_context(
    precision: str, device: torch.device
) -> tuple[torch.dtype, Callable[[], AbstractContextManager[Any]]]:
    if precision in QUANTIZED:
        return torch.float32, nullcontext  # the weights are quantized, the inputs stay fp32
    if precision == "amp":
        amp_dtype = torch.bfloat16 if device.type == "cpu" else torch.float16
        return torch.float32, lambda: torch.autocast(device.type, dtype=amp_dtype)
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    return dtype, nullcontext


@dataclass(frozen=True)
class _Setup:
    """How to build the callable that is timed: the case, its precision, the mode."""

    case: Case
    precision: str
    device: torch.device
    mode: Mode

    def step(self, config: str = "eager") -> tuple[Fn, tuple[torch.Tensor, ...]]:
        """A fresh instance (same seed, same weights) as an inference call or a training step."""
        dtype, context = _dtype_and_context(self.precision, self.device)
        fn, args = _made(self.case, self.device, dtype)
        if self.precision in QUANTIZED and isinstance(fn, torch.nn.Module):
            fn = quantized(fn, self.precision, self.device)
        if self.mode == "training":
            return _training_step(fn, self.precision, self.device, context, config), args
        forward = fn if config == "eager" else compiled(fn, config, self.device)
        return _inference_call(forward, context), args


def _inference_call(forward: Fn, context: Callable[[], AbstractContextManager[Any]]) -> Fn:
    def call(*args: torch.Tensor) -> torch.Tensor:
        with context(), torch.no_grad():
            return forward(*args)

    return call


def _training_step(
    fn: Fn,
    precision: str,
    device: torch.device,
    context: Callable[[], AbstractContextManager[Any]],
    config: str,
) -> Fn:
    """One optimizer step; returns the loss. AMP scales the loss (GradScaler), as AMP should."""
    assert isinstance(fn, torch.nn.Module), "training needs a module"
    model = fn.train()
    forward = model if config == "eager" else compiled(model, config, device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "amp")

    def step(*args: torch.Tensor) -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        with context():
            loss: torch.Tensor = forward(*args).float().square().mean()
        scaler.scale(loss).backward()  # type: ignore[no-untyped-call]
        scaler.step(optimizer)
        scaler.update()
        return loss.detach()

    return step


def _measure(
    case: Case, config: str, precision: str, device: torch.device, plan: Plan, mode: Mode
) -> list[dict[str, Any]]:
    setup = _Setup(case, precision, device, mode)
    eager, args = setup.step()
    reference = _reference(setup, args)
    with _gc_paused(plan.quiet_gc):  # a timed call; what compilation_latency subtracts
        eager_first, eager_output = _timed(eager, args, device)
    eager_peak = peak_memory_gb(lambda: eager(*args), device)
    sampler = HardwareSampler(device)
    if config == "eager":
        for _ in range(plan.warmup):
            _timed(eager, args, device)
        with sampler:
            samples = [t for t, _ in _repeated(plan, lambda: (_timed(eager, args, device)[0], 0))]
        return [
            {"metric": "peak_memory", "value": eager_peak},
            *_latency_rows(samples, case.batch_size),
            *_accuracy_rows(eager_output, reference, precision, case.tolerance_scale),
            *sampler.rows(),
            *profile_rows(eager, args, device, precision=precision),
        ]
    # Here, not on top: dynamo's import is a second or two of every eager-only shard's start.
    from torch._dynamo.utils import counters

    counters.clear()
    compiled_fn, _ = setup.step(config)
    with kernels_named(device), captured_code() as codes:
        compiled_first, output = _timed(compiled_fn, args, device)
        output = output.detach().clone()  # CUDA graph replays reuse their output buffers
        if config == "dynamic":  # other batch sizes: a dynamic graph serves them all
            for variant in _batch_variants(args, case.batch_args):
                compiled_first += _timed(compiled_fn, variant, device)[0]
    # What it compiled under, once compiled (the config modules imported): beside its latency.
    settings = recorded_settings(options=inductor_options(config))
    for _ in range(plan.warmup):
        _timed(eager, args, device)
        _timed(compiled_fn, args, device)
    with sampler:  # eager and compiled interleaved, as benchmarks/dynamo does
        pairs = _repeated(
            plan, lambda: (_timed(compiled_fn, args, device)[0], _timed(eager, args, device)[0])
        )
    samples, eager_samples = [c for c, _ in pairs], [e for _, e in pairs]
    peak = peak_memory_gb(lambda: compiled_fn(*args), device)
    dynamo = _dynamo_rows()
    return [
        {"metric": "compilation_latency", "value": max(compiled_first - eager_first, 0.0) / 1000},
        {
            "metric": "speedup",
            "samples": [e / c for e, c in zip(eager_samples, samples, strict=True)],
            "value": float(np.median(eager_samples) / np.median(samples)),
        },
        {"metric": "peak_memory", "value": peak},
        {"metric": "eager_peak_mem", "value": eager_peak},
        *([{"metric": "compression_ratio", "value": eager_peak / peak}] if peak > 0 else []),
        *dynamo,
        *_latency_rows(
            samples, case.batch_size, {"compiler_settings": settings} if settings else None
        ),
        *_accuracy_rows(output, reference, precision, case.tolerance_scale),
        *sampler.rows(),
        *_compiled_profile(
            profile_rows(compiled_fn, args, device, precision=precision), dynamo, codes
        ),
    ]


def _compiled_profile(
    rows: list[dict[str, Any]], dynamo: list[dict[str, Any]], codes: list[str]
) -> list[dict[str, Any]]:
    """The profile's rows, dynamo's counts and Inductor's code added to its kernel profile.

    The code: what Inductor generated for the case's graphs (``workers.inductor_code``).
    """
    counted = {row["metric"]: int(row["value"]) for row in dynamo}
    for row in rows:
        profile = (row.get("extra") or {}).get(PROFILE)
        if profile is not None:
            profile["graphs"] = counted["unique_graphs"]
            profile["recompiles"] = counted["recompiles"]
            if codes:
                profile["code"] = {"graphs": codes, "kernels": kernels_of(codes)}
    return rows


def _repeated(plan: Plan, timed: Callable[[], tuple[float, float]]) -> list[tuple[float, float]]:
    """Timed rounds (measured first), repeated until the first figure is stable."""
    with _gc_paused(plan.quiet_gc):
        rounds = [timed() for _ in range(plan.repeats)]
        while (
            len(rounds) < plan.max_repeats and spread([r[0] for r in rounds]) > plan.target_spread
        ):
            rounds += [timed() for _ in range(max(plan.repeats // 2, 1))]
    return rounds


def spread(samples: list[float]) -> float:
    """Median absolute deviation over the median: a spread that one outlier does not move."""
    median = float(np.median(samples))
    return float(np.median(np.abs(np.asarray(samples) - median))) / median if median else 0.0


@contextmanager
def _gc_paused(paused: bool) -> Iterator[None]:
    if not paused:
        yield
        return
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def scaled(case: Case, factor: int) -> Case:
    """The case at ``factor`` times its batch (its batch inputs repeated); as is without one."""
    if factor == 1 or not case.batch_args or case.make is None:
        return case
    make = case.make

    def make_scaled(
        device: torch.device, dtype: torch.dtype
    ) -> tuple[Fn, tuple[torch.Tensor, ...]]:
        fn, args = make(device, dtype)
        return fn, tuple(
            torch.cat([a] * factor) if i in case.batch_args else a for i, a in enumerate(args)
        )

    return replace(case, batch_size=case.batch_size * factor, make=make_scaled)


def _batch_variants(
    args: tuple[torch.Tensor, ...], batch_args: tuple[int, ...]
) -> list[tuple[torch.Tensor, ...]]:
    """The inputs at half and at twice the batch (the batch inputs cut or repeated)."""
    batch = args[batch_args[0]].shape[0]
    variants = []
    for size in sorted({max(1, batch // 2), 2 * batch} - {batch}):
        variants.append(
            tuple(
                torch.cat([a] * (size // batch + 1))[:size] if i in batch_args else a
                for i, a in enumerate(args)
            )
        )
    return variants


def _made(
    case: Case, device: torch.device, dtype: torch.dtype
) -> tuple[Fn, tuple[torch.Tensor, ...]]:
    """The case's function and inputs, from the same seed every time (same weights)."""
    assert case.make is not None, f"{case.model} measures itself"
    torch.manual_seed(0)
    return case.make(device, dtype)


def _reference(setup: _Setup, args: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """The fp32 eager output of a first call (or training step) on the same inputs, upcast."""
    fn, _ = _Setup(setup.case, "fp32", setup.device, setup.mode).step()
    return fn(*(a.float() if a.is_floating_point() else a for a in args)).float()


def _latency_rows(
    samples: list[float], batch_size: int, extra: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    p50, p90, p99 = (float(np.percentile(samples, q)) for q in (50, 90, 99))
    latency = {"metric": "latency", "unit": "ms", "samples": samples, "value": p50}
    return [
        {**latency, "extra": extra} if extra else latency,
        {"metric": "latency_p90", "value": p90},
        {"metric": "latency_p99", "value": p99},
        {"metric": "throughput", "value": batch_size / (p50 / 1000.0)},
    ]


def _accuracy_rows(
    output: torch.Tensor, reference: torch.Tensor, precision: str, scale: float = 1.0
) -> list[dict[str, Any]]:
    result = output.detach().float()
    if not torch.isfinite(result).all():
        return [
            {
                "metric": "accuracy",
                "text_value": "fail_accuracy",
                "extra": {"why": "NaN or Inf in the output"},
            }
        ]
    error = float((result - reference).abs().max())
    allowed = TOLERANCE.get(precision, 1e-2) * scale * max(float(reference.abs().max()), 1e-12)
    accuracy: dict[str, Any] = {"metric": "accuracy", "text_value": "pass"}
    if error > allowed:
        why = f"max error {error:.3g} above the {precision} tolerance {allowed:.3g}"
        accuracy = {**accuracy, "text_value": "fail_accuracy", "extra": {"why": why}}
    return [accuracy, {"metric": "max_error", "value": error}]


def _dynamo_rows() -> list[dict[str, Any]]:
    from torch._dynamo.utils import counters

    stats = counters["stats"]
    breaks = sum(counters["graph_break"].values())
    return [
        {"metric": "graph_breaks", "value": float(breaks)},
        {"metric": "unique_graphs", "value": float(stats.get("unique_graphs", 0))},
        {"metric": "recompiles", "value": float(max(stats.get("unique_graphs", 0) - 1, 0))},
    ]
