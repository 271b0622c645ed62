"""Numbers with units, percentages and the PyTorch dashboard's absolute warning lines.

Whether a change is better or worse is ``app.benchmarks.comparison``'s to say.
"""

import math

MISSING = "\u2013"  # an en dash: no value

# Below these a cell is outlined, whatever the base run says.
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


def warning(family: str, value: float | None) -> bool:
    """Below the absolute warning line of a metric family (pass rate 90%, speedup 0.95x...)."""
    floor = WARN_BELOW.get(family)
    return floor is not None and value is not None and value < floor


def config_label(config: str, device: str) -> str:
    """A config's name as people on that device say it (CUDA graphs are HIP graphs on ROCm)."""
    if device == "rocm" and config == "cudagraphs":
        return f"cudagraphs ({HIP_GRAPHS})"
    return config
