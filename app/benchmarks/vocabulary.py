"""The fixed words of benchwatch: units, well-known metrics, precisions, compiler configs.

Names follow PyTorch's TorchInductor dashboard and ``benchmarks/dynamo`` so that numbers agree
with what PyTorch users already read (docs/design.md §9). Pure data and lookups: no I/O.
"""

import re
from dataclasses import dataclass
from typing import Any, Literal

from app.core.names import NAME_PATTERN as NAME_PATTERN  # vocab.NAME_PATTERN: core's rule

Device = Literal["cuda", "rocm", "xpu", "cpu", "mps"]
Mode = Literal["training", "inference"]
Trigger = Literal["schedule", "ci", "manual"]
Status = Literal["ok", "failed", "skipped"]
MetricKind = Literal[
    "performance", "accuracy", "memory", "compile", "hardware", "kernel", "framework"
]

# Unit -> (dimension, factor to the dimension's base unit). Values convert within a dimension.
UNITS: dict[str, tuple[str, float]] = {
    "ns": ("time", 1e-9),
    "us": ("time", 1e-6),
    "µs": ("time", 1e-6),
    "ms": ("time", 1e-3),
    "s": ("time", 1.0),
    "min": ("time", 60.0),
    "B": ("bytes", 1.0),
    "KB": ("bytes", 1e3),
    "MB": ("bytes", 1e6),
    "GB": ("bytes", 1e9),
    "TB": ("bytes", 1e12),
    "KiB": ("bytes", 2.0**10),
    "MiB": ("bytes", 2.0**20),
    "GiB": ("bytes", 2.0**30),
    "TiB": ("bytes", 2.0**40),
    "B/s": ("bandwidth", 1.0),
    "KB/s": ("bandwidth", 1e3),
    "MB/s": ("bandwidth", 1e6),
    "GB/s": ("bandwidth", 1e9),
    "TB/s": ("bandwidth", 1e12),
    "GiB/s": ("bandwidth", 2.0**30),
    "FLOPS": ("flops", 1.0),
    "GFLOPS": ("flops", 1e9),
    "TFLOPS": ("flops", 1e12),
    "GFLOP/s": ("flops", 1e9),
    "TFLOP/s": ("flops", 1e12),
    "TFLOPS/s": ("flops", 1e12),
    "items/s": ("items/s", 1.0),
    "samples/s": ("samples/s", 1.0),
    "tokens/s": ("tokens/s", 1.0),
    "images/s": ("images/s", 1.0),
    "it/s": ("it/s", 1.0),
    "ops/s": ("ops/s", 1.0),
    "req/s": ("req/s", 1.0),
    "x": ("ratio", 1.0),
    "%": ("percent", 1.0),
    "": ("dimensionless", 1.0),
    "count": ("count", 1.0),
    "instructions": ("count", 1.0),
    "W": ("power", 1.0),
    "J": ("energy", 1.0),
    "kJ": ("energy", 1e3),
    "Wh": ("energy", 3600.0),
    "C": ("temperature", 1.0),
    "MHz": ("frequency", 1e6),
    "GHz": ("frequency", 1e9),
}
# Dimensions whose values cannot be negative (a negative latency is a bug upstream).
NON_NEGATIVE_DIMENSIONS = frozenset(
    {
        "time",
        "bytes",
        "bandwidth",
        "flops",
        "items/s",
        "samples/s",
        "tokens/s",
        "images/s",
        "it/s",
        "ops/s",
        "req/s",
        "ratio",
        "count",
        "power",
        "energy",
        "frequency",
    }
)
# Directions that follow from the unit alone, for metrics that are not well known.
DIRECTION_BY_DIMENSION = {
    "time": False,
    "bytes": False,
    "energy": False,
    "power": False,
    "bandwidth": True,
    "flops": True,
    "items/s": True,
    "samples/s": True,
    "tokens/s": True,
    "images/s": True,
    "it/s": True,
    "ops/s": True,
    "req/s": True,
}


@dataclass(frozen=True)
class MetricSpec:
    """Defaults of a well-known metric: unit, direction and kind."""

    unit: str
    higher_is_better: bool
    kind: MetricKind


def _counts(kind: MetricKind, *names: str) -> dict[str, MetricSpec]:
    return {name: MetricSpec("count", False, kind) for name in names}


WELL_KNOWN_METRICS: dict[str, MetricSpec] = {
    "latency": MetricSpec("ms", False, "performance"),
    "latency_p50": MetricSpec("ms", False, "performance"),
    "latency_p90": MetricSpec("ms", False, "performance"),
    "latency_p99": MetricSpec("ms", False, "performance"),
    "abs_latency": MetricSpec("ms", False, "performance"),
    "throughput": MetricSpec("items/s", True, "performance"),
    "speedup": MetricSpec("x", True, "performance"),
    "compilation_latency": MetricSpec("s", False, "compile"),
    "compile_time_instruction_count": MetricSpec("instructions", False, "compile"),
    "compression_ratio": MetricSpec("x", True, "memory"),
    "peak_memory": MetricSpec("GB", False, "memory"),
    "eager_peak_mem": MetricSpec("GB", False, "memory"),
    "dynamo_peak_mem": MetricSpec("GB", False, "memory"),
    "accuracy": MetricSpec("", True, "accuracy"),
    "max_error": MetricSpec("", False, "accuracy"),
    **_counts(
        "framework",
        "graph_breaks",
        "unique_graph_breaks",
        "unique_graphs",
        "recompiles",
        "calls_captured",
        "autograd_captures",
        "autograd_compiles",
        "cudagraph_skips",
    ),
    "kernel_count": MetricSpec("count", False, "kernel"),
    "kernel_launch_latency": MetricSpec("us", False, "kernel"),
    "allreduce_latency": MetricSpec("us", False, "framework"),
    "allreduce_bus_bandwidth": MetricSpec("GB/s", True, "framework"),
    "gpu_utilization": MetricSpec("%", True, "hardware"),
    "memory_bandwidth_utilization": MetricSpec("%", True, "hardware"),
    "power": MetricSpec("W", False, "hardware"),
    "energy": MetricSpec("J", False, "hardware"),
    "temperature": MetricSpec("C", False, "hardware"),
    "gpu_memory_used": MetricSpec("GB", False, "hardware"),
    "sm_clock": MetricSpec("MHz", True, "hardware"),
    "memory_clock": MetricSpec("MHz", True, "hardware"),
    "pcie_rx": MetricSpec("MB/s", False, "hardware"),
    "pcie_tx": MetricSpec("MB/s", False, "hardware"),
    "throttle_events": MetricSpec("count", False, "hardware"),
    "ecc_errors": MetricSpec("count", False, "hardware"),
    "cpu_utilization": MetricSpec("%", False, "hardware"),
    "host_rss": MetricSpec("GB", False, "hardware"),
    "host_time": MetricSpec("ms", False, "kernel"),
    "device_time": MetricSpec("ms", False, "kernel"),
    "autocast_overhead": MetricSpec("ms", False, "framework"),
}
METRIC_ALIASES = {"compile_time": "compilation_latency", "compilation_time": "compilation_latency"}

# Tiers: the built-in suite's smallest first, then ``models`` (the real models: torchvision,
# timm, transformers, diffusers at their published sizes); what each runs: workers.tiers.TIERS
# (tests/workers/test_tiers.py).
SUITE_TIERS = ("test", "smoke", "daily", "full", "models")

PRECISIONS = ("fp32", "tf32", "amp", "fp16", "bf16", "fp8", "int8", "int4")
PRECISION_ALIASES = {
    "float32": "fp32",
    "float16": "fp16",
    "half": "fp16",
    "bfloat16": "bf16",
    "amp_fp16": "amp",
    "amp_bf16": "amp",
    "quant": "int8",
    "float8": "fp8",
}

# Canonical compiler configs (PyTorch dashboard names) and the options each stands for.
COMPILER_CONFIGS: dict[str, dict[str, Any]] = {
    "eager": {"backend": "eager"},
    "default": {"backend": "inductor", "cudagraphs": False},
    "cudagraphs": {"backend": "inductor", "cudagraphs": True},
    "dynamic": {"backend": "inductor", "cudagraphs": True, "dynamic": True},
    "max_autotune": {"backend": "inductor", "mode": "max-autotune"},
    "max_autotune_no_cudagraphs": {"backend": "inductor", "mode": "max-autotune-no-cudagraphs"},
    "cpp_wrapper": {"backend": "inductor", "cpp_wrapper": True},
    "aot_inductor": {"backend": "inductor", "aot_inductor": True},
    "freezing": {"backend": "inductor", "freezing": True},
    "cudagraphs_freezing": {"backend": "inductor", "cudagraphs": True, "freezing": True},
    "export": {"backend": "inductor", "export": True},
}
# PyTorch's CSV backend prefixes and other spellings -> canonical names.
CONFIG_ALIASES = {
    "inductor_no_cudagraphs": "default",
    "inductor": "cudagraphs",
    "inductor_with_cudagraphs": "cudagraphs",
    "hipgraphs": "cudagraphs",
    "hip_graphs": "cudagraphs",
    "inductor_dynamic": "dynamic",
    "cudagraphs_dynamic": "dynamic",
    "dynamic_shapes": "dynamic",
    "inductor_cpp_wrapper": "cpp_wrapper",
    "inductor_aot_inductor": "aot_inductor",
    "inductor_with_cudagraphs_freezing": "cudagraphs_freezing",
    "inductor_max_autotune": "max_autotune",
    "inductor_max_autotune_no_cudagraphs": "max_autotune_no_cudagraphs",
    "inductor_export": "export",
    "inductor_eager": "eager",
}

# Accuracy statuses of benchmarks/dynamo that count as passing.
PASSING_ACCURACY = frozenset({"pass", "pass_due_to_skip", "eager_variation"})


def canonical_metric(name: str) -> str:
    """The canonical name of a metric (aliases such as ``compile_time`` folded)."""
    return METRIC_ALIASES.get(name, name)


def canonical_precision(name: str) -> str | None:
    """The canonical precision for a name or alias, or None when unknown."""
    lowered = name.lower()
    lowered = PRECISION_ALIASES.get(lowered, lowered)
    return lowered if lowered in PRECISIONS else None


def canonical_config(name: str) -> str:
    """The canonical compiler-config name; unknown names are user-defined and kept."""
    return CONFIG_ALIASES.get(name, name)


def unit_factor(from_unit: str, to_unit: str) -> float | None:
    """Factor converting values in ``from_unit`` to ``to_unit``; None across dimensions."""
    source, target = UNITS[from_unit], UNITS[to_unit]
    if source[0] != target[0]:
        return None
    return source[1] / target[1]


def default_direction(unit: str) -> bool | None:
    """Whether higher is better, as far as the unit alone tells (None: it does not)."""
    return DIRECTION_BY_DIMENSION.get(UNITS[unit][0])


def allows_negative(unit: str) -> bool:
    """Whether a value in this unit may be negative."""
    return UNITS[unit][0] not in NON_NEGATIVE_DIMENSIONS


_ARCH_PATTERNS = (
    r"\b(mi\d{3}[a-z]?)\b",
    r"\b([abhl]\d{1,3}[a-z]?)\b",
    r"\b(gb\d{3})\b",
    r"\b(rtx ?\d{4}(?: ?ti)?)\b",
    r"\b(v100|t4|p100)\b",
)


def short_arch(arch: str) -> str:
    """A short, comparable name for a device string: 'NVIDIA H100 80GB HBM3' -> 'h100'."""
    lowered = arch.lower()
    for pattern in _ARCH_PATTERNS:
        if match := re.search(pattern, lowered):
            return match.group(1).replace(" ", "")
    slug = re.sub(r"[^a-z0-9]+", "-", lowered).strip("-")
    return slug[:64]
