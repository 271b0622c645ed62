"""Numbers with units, relative changes and the PyTorch dashboard's colouring rules."""

import math

MISSING = "\u2013"  # an en dash: no value

# Relative change that colours a cell (memory is noisier: 20%), and absolute warnings.
RELATIVE = 0.05
RELATIVE_MEMORY = 0.20
WARN_BELOW = {"pass_rate": 0.90, "geomean_speedup": 0.95, "mean_compression_ratio": 0.9}
HIP_GRAPHS = "HIP graphs"


def number(value: float | None, unit: str = "") -> str:
    """A value with 3 significant digits (more for large ones) and its unit."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return MISSING
    if unit == "%":
        return f"{value:.1f}%"
    if unit == "x":
        return f"{value:.2f}x"
    magnitude = abs(value)
    text = f"{value:,.0f}" if magnitude >= 1000 else f"{value:.3g}"
    return f"{text} {unit}".strip()


def percent(fraction: float | None) -> str:
    """A relative change as a signed percentage."""
    return MISSING if fraction is None else f"{fraction:+.1%}"


def change(new: float | None, base: float | None) -> float | None:
    """Relative change from base to new (None when either is missing or base is zero)."""
    if new is None or base is None or base == 0:
        return None
    return (new - base) / abs(base)


def verdict(rel: float | None, higher_is_better: bool | None, *, memory: bool = False) -> str:
    """``better``, ``worse`` or ``same`` by the dashboard's relative threshold."""
    if rel is None or higher_is_better is None:
        return "same"
    if abs(rel) <= (RELATIVE_MEMORY if memory else RELATIVE):
        return "same"
    return "better" if (rel > 0) == higher_is_better else "worse"


def warning(family: str, value: float | None) -> bool:
    """Below the absolute warning line of a metric family (pass rate 90%, speedup 0.95x...)."""
    floor = WARN_BELOW.get(family)
    return floor is not None and value is not None and value < floor


def config_label(config: str, device: str) -> str:
    """A config's name as people on that device say it (CUDA graphs are HIP graphs on ROCm)."""
    if device == "rocm" and config == "cudagraphs":
        return f"cudagraphs ({HIP_GRAPHS})"
    return config
