"""What changed between the last good and the first bad run: environment diff and hints.

Pure functions over plain values, so the rules are easy to read and to test.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

ENVIRONMENT_FIELDS = ("torch", "torch_git_sha", "triton", "python", "cuda", "hip", "driver")
MOVED = 0.05  # a correlated metric "rose" when it moved by more than 5%


def diff_environments(good: Mapping[str, Any], bad: Mapping[str, Any]) -> dict[str, Any]:
    """Fields, packages and compiler options that differ: ``{name: [good, bad]}``."""
    diff: dict[str, Any] = {
        name: [good.get(name, ""), bad.get(name, "")]
        for name in ENVIRONMENT_FIELDS
        if good.get(name, "") != bad.get(name, "")
    }
    for section in ("packages", "compiler_options"):
        changed = _diff_mapping(good.get(section) or {}, bad.get(section) or {})
        if changed:
            diff[section] = changed
    return diff


def _diff_mapping(good: Mapping[str, Any], bad: Mapping[str, Any]) -> dict[str, list[Any]]:
    return {
        key: [good.get(key), bad.get(key)]
        for key in sorted(good.keys() | bad.keys())
        if good.get(key) != bad.get(key)
    }


@dataclass(frozen=True)
class Reading:
    """One metric of one benchmark in the last good and the first bad run."""

    before: float | None
    after: float | None

    @property
    def rel(self) -> float | None:
        """Relative change, when both values exist and the base is non-zero."""
        if self.before is None or self.after is None or self.before == 0:
            return None
        return (self.after - self.before) / abs(self.before)

    def rose(self) -> bool:
        """Moved up by more than MOVED (or appeared from zero)."""
        if self.before == 0 and (self.after or 0) > 0:
            return True
        return (self.rel or 0.0) > MOVED


METRIC_HINTS = (
    (("dynamo_peak_mem", "peak_memory", "peak_reserved_memory"), "peak memory rose"),
    (("compilation_latency",), "compile time rose"),
    (("kernel_count",), "kernel count rose"),
    (("allreduce_latency",), "all-reduce time rose"),
    (("recompiles",), "recompiles appeared"),
)


def metric_hints(metric: str, same_case: Mapping[str, Reading]) -> list[str]:
    """Hints from the other metrics of the same benchmark in the same two runs."""
    hints = []
    for names, text in METRIC_HINTS:
        for name in names:
            reading = same_case.get(name)
            if name != metric and reading is not None and reading.rose():
                hints.append(_with_change(text, reading))
                break
    breaks = same_case.get("graph_breaks")
    if metric != "graph_breaks" and breaks is not None and breaks.rose():
        verb = "appeared" if not breaks.before else "rose"
        hints.append(f"graph breaks {verb} ({_fmt(breaks.before)} -> {_fmt(breaks.after)})")
    host, device = same_case.get("host_time"), same_case.get("device_time")
    if host is not None and device is not None and host.rose() and not device.rose():
        hints.append("host-side overhead rose while device time did not")
    return hints


def config_hint(config: str, rel: float, siblings: Mapping[str, Reading]) -> str | None:
    """The hint "only the X config moved", when the other configs' same metric stayed flat."""
    flat = [name for name, r in siblings.items() if r.rel is not None and abs(r.rel) <= MOVED]
    moved = [name for name, r in siblings.items() if r.rel is not None and abs(r.rel) > MOVED]
    if not flat or moved or abs(rel) <= MOVED:
        return None
    label = "dynamic-shapes" if config == "dynamic" else config
    return f"only the {label} config moved ({', '.join(sorted(flat))} stayed flat)"


def _with_change(text: str, reading: Reading) -> str:
    if reading.rel is None:
        return f"{text} ({_fmt(reading.before)} -> {_fmt(reading.after)})"
    return f"{text} ({reading.rel:+.0%})"


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:g}"
