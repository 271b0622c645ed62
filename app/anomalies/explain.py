"""What changed between the last good and the first bad run: environment diff and hints.

Where both runs kept a kernel profile of the case, the step's kernel diff adds its own hints
(``kernel_hints``): where the step is, fusion changes, a launch-bound step.

The rules are pure functions over plain values, so they are easy to read and to test;
``regression_hints`` at the end reads a regression's two runs and applies them.
"""

import json
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from app.anomalies.models import Regression
from app.benchmarks.comparison import relative_change, threshold_for
from app.benchmarks.service import BenchmarkKey
from app.kernels import service as kernels
from app.kernels.diff import KernelDiff
from app.kernels.identity import Identity
from app.runs.reads import list_run_results

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
        return relative_change(self.after, self.before)

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


# Root causes of the seed's typical problems (issue 15, point 7). A hint needs every metric
# it names to have moved by more than ROOT_CAUSE_MARGIN the hurting way, between the same two
# runs as the regression: MOVED (5%) is within the run-to-run noise of timings and peak memory.
ROOT_CAUSE_MARGIN = 0.10
LAUNCH_METRICS = ("kernel_launch_latency", "host_time")  # launch latency, or the host's share
PEAK_MEMORY_METRICS = ("dynamo_peak_mem", "peak_memory", "peak_reserved_memory")
BANDWIDTH_METRIC = "allreduce_bus_bandwidth"  # workers/collective.py, nccl-tests' busbw
COLLECTIVE_LATENCY_METRIC = "allreduce_latency"


@dataclass(frozen=True)
class Scope:
    """Where a regression is: its compiler config and the machine that measured it."""

    config: str  # canonical name (``eager``, ``dynamic``, ...)
    options: Mapping[str, Any]  # the config's compile options
    gpu_count: int | None
    collective: bool = False  # the benchmark measures a collective itself

    @property
    def compiled(self) -> bool:
        """Compiled by a backend other than eager (a user config names its backend)."""
        return self.config != "eager" and self.options.get("backend", "inductor") != "eager"

    @property
    def dynamic(self) -> bool:
        """Compiled for dynamic shapes."""
        return self.config == "dynamic" or bool(self.options.get("dynamic"))

    @property
    def distributed(self) -> bool:
        """More than one GPU, or a collective benchmark: communication can be the cause."""
        return (self.gpu_count or 0) > 1 or self.collective


def root_cause_hints(
    direction: str,
    scope: Scope,
    same_case: Mapping[str, Reading],
    collectives: Mapping[str, Mapping[str, Reading]],
    kernels: KernelDiff | None = None,
) -> list[str]:
    """Likely causes of a regression, each naming the measured metrics that back it.

    Args:
        direction: the step's kind; only a ``regression`` (a step that hurts) gets these.
        scope: the regressed benchmark's config and machine.
        same_case: the other metrics of the same benchmark in the last good and first bad run.
        collectives: the collective benchmarks of the same two runs (a label, such as the
            case and its message size, to their metrics); the regressed one too, if it is one.
        kernels: the step's kernel diff, where both runs kept a profile of the case: its
            kernel count and recompiles stand in for metrics the runs lack
            (``kernel_readings``), and the code-size hint names the kernels that appeared.
    """
    if direction != "regression":
        return []
    if kernels is not None:
        same_case = {**kernel_readings(kernels), **same_case}
    hints = []
    if scope.compiled and (hint := _code_size(same_case)):
        if kernels is not None and (new := _appeared(kernels)):
            hint += f"; new kernels: {new}"
        hints.append(hint)
    if scope.dynamic and (hint := _fragmentation(same_case)):
        hints.append(hint)
    if scope.distributed:
        hint = _congestion(collectives)
        waiting = _collective_kernels(kernels) if kernels is not None else None
        if hint and waiting:
            hints.append(f"{hint}; {waiting}")
        elif hint or waiting:
            hints.append(hint or f"likely network congestion: {waiting}")
    return hints


def kernel_readings(found: KernelDiff) -> dict[str, Reading]:
    """What a kernel diff measured, as readings: kernels launched a call, recompiles."""
    readings = {
        "kernel_count": Reading(
            sum(k.base_calls for k in found.kernels), sum(k.head_calls for k in found.kernels)
        )
    }
    before, after = found.recompiles
    if before is not None and after is not None:
        readings["recompiles"] = Reading(float(before), float(after))
    return readings


def _collective_kernels(found: KernelDiff) -> str | None:
    """The collective kernels (NCCL, RCCL) that got slower, when they carry enough of the step.

    ``collective kernels carry 62% of the step: ncclDevKernel_AllReduce +40%``.
    """
    slower = [k for k in found.kernels if COLLECTIVE_KERNEL.search(k.name) and k.change == "slower"]
    share = sum(k.share or 0.0 for k in slower)
    if not slower or share < COLLECTIVE_SHARE:
        return None
    top = slower[0]
    return (
        f"collective kernels carry {share:.0%} of the step: {top.name} {top.relative or 0.0:+.0%}"
    )


def _appeared(found: KernelDiff, shown: int = 3) -> str:
    """The kernels that appeared, the largest first: ``fused_a, fused_b and 2 more``."""
    new = [str(Identity(k.kind, k.name)) for k in found.kernels if k.change == "appeared"]
    more = f" and {len(new) - shown} more" if len(new) > shown else ""
    return ", ".join(new[:shown]) + more


def _code_size(same_case: Mapping[str, Reading]) -> str | None:
    """More kernels and slower launches: the generated code outgrew the instruction cache."""
    kernels = _rose_by_margin(same_case, "kernel_count")
    launches = [b for name in LAUNCH_METRICS if (b := _rose_by_margin(same_case, name))]
    if kernels is None or not launches:
        return None
    return "likely instruction-cache pressure / code size: " + ", ".join([kernels, *launches])


def _fragmentation(same_case: Mapping[str, Reading]) -> str | None:
    """New recompiles and a higher peak: each shape's graph holds its own memory blocks."""
    recompiles = same_case.get("recompiles")
    if recompiles is None or recompiles.before is None or recompiles.after is None:
        return None
    if recompiles.after - recompiles.before < 1 or not (
        recompiles.before == 0 or (recompiles.rel or 0.0) > ROOT_CAUSE_MARGIN
    ):
        return None
    peak = next(
        (b for name in PEAK_MEMORY_METRICS if (b := _rose_by_margin(same_case, name))), None
    )
    if peak is None:
        return None
    backing = f"recompiles {_num(recompiles.before)} -> {_num(recompiles.after)}"
    return f"likely memory fragmentation from recompiles: {backing}, {peak}"


def _congestion(collectives: Mapping[str, Mapping[str, Reading]]) -> str | None:
    """All-reduce bandwidth fell on most message sizes: the interconnect is the bottleneck.

    A collective drops when its bus bandwidth fell by more than the margin, or, where it has
    no bandwidth, when its latency rose by more. Most of those measured must drop (one slow
    size is noise), and the hint cites the largest drops.
    """
    measured: list[tuple[float, str]] = []  # (relative change the hurting way, backing text)
    for label, metrics in sorted(collectives.items()):
        bandwidth = metrics.get(BANDWIDTH_METRIC)
        latency = metrics.get(COLLECTIVE_LATENCY_METRIC)
        if bandwidth is not None and bandwidth.rel is not None:
            measured.append((-bandwidth.rel, f"{_backing(BANDWIDTH_METRIC, bandwidth)} [{label}]"))
        elif latency is not None and latency.rel is not None:
            text = f"{_backing(COLLECTIVE_LATENCY_METRIC, latency)} [{label}]"
            measured.append((latency.rel, text))
    dropped = sorted((m for m in measured if m[0] > ROOT_CAUSE_MARGIN), key=lambda m: -m[0])
    if not dropped or 2 * len(dropped) <= len(measured):
        return None
    cited = ", ".join(text for _, text in dropped[:2])
    return (
        f"likely network congestion: all-reduce slower on {len(dropped)} of {len(measured)}"
        f" collectives: {cited}"
    )


# A step is launch-bound when most of it is outside the kernels while their time held.
LAUNCH_BOUND_SHARE = 0.5
COLLECTIVE_KERNEL = re.compile(r"nccl|rccl", re.IGNORECASE)  # NCCL's and RCCL's kernels
COLLECTIVE_SHARE = 0.25  # of the step, for the congestion hint to cite them
KERNELS_HINT = "kernels: "  # the hint that says where the step is; a notice's line ends on it


def kernel_hints(found: KernelDiff) -> list[str]:
    """Hints from the step's kernel diff: where the step is, fusion changes, launch-bound."""
    if found.step_us == 0:
        return []
    hints = [KERNELS_HINT + found.headline] if found.headline else []
    for fusion in found.fusions:
        before, after = " + ".join(fusion.before), " + ".join(fusion.after)
        verb = "split into" if fusion.change == "split" else "fused into"
        share = f", {fusion.share:.0%} of the step" if fusion.share is not None else ""
        hints.append(f"fusion changed: {before} {verb} {after}{share}")
    kernel_time = sum(k.base_us for k in found.kernels)
    kernel_delta = sum(k.delta_us for k in found.kernels) + found.other_delta_us
    flat = kernel_time > 0 and abs(kernel_delta) <= threshold_for() * kernel_time
    outside = found.outside_delta_us / found.step_us
    if found.step_us > 0 and flat and outside >= LAUNCH_BOUND_SHARE:
        hints.append(
            f"likely launch-bound: {outside:.0%} of the step is outside the kernels "
            f"(launches, host time) while the kernels' time held ({kernel_delta:+.1f} us)"
        )
    return hints


def kernels_line(hints: Sequence[str]) -> str | None:
    """Where a step is among the kernels (``kernel_hints``' first), if its hints say."""
    return next((h.removeprefix(KERNELS_HINT) for h in hints if h.startswith(KERNELS_HINT)), None)


def _rose_by_margin(readings: Mapping[str, Reading], name: str) -> str | None:
    """``name +38% (412 -> 569)`` when the metric rose by more than the margin, else None."""
    reading = readings.get(name)
    if reading is None or reading.rel is None or reading.rel <= ROOT_CAUSE_MARGIN:
        return None
    return _backing(name, reading)


def _backing(name: str, reading: Reading) -> str:
    return f"{name} {reading.rel or 0.0:+.0%} ({_num(reading.before)} -> {_num(reading.after)})"


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"


COLLECTIVE_METRICS = frozenset({BANDWIDTH_METRIC, COLLECTIVE_LATENCY_METRIC})


def case_label(model: str, params_json: str) -> str:
    """A collective's name in a hint: its model and parameters (message size, world size)."""
    params = json.loads(params_json) if params_json else {}
    return " ".join([model, *(f"{key}={params[key]}" for key in sorted(params))])


# --- a regression's hints, from its two runs ------------------------------------------------

CaseValues = dict[BenchmarkKey, dict[str, float | None]]  # per benchmark: metric -> value


def case_values(session: Session, cache: dict[int, CaseValues], run_id: int) -> CaseValues:
    """Every benchmark's metric values in one run (None where not ok), cached per run."""
    if run_id not in cache:
        table: CaseValues = defaultdict(dict)
        for row in list_run_results(session, run_id):
            ok = row["status"] == "ok"
            table[BenchmarkKey.of_row(row)][row["metric"]] = row["value"] if ok else None
        cache[run_id] = table
    return cache[run_id]


def regression_hints(
    session: Session, cache: dict[int, CaseValues], regression: Regression
) -> list[str]:
    """Hints from the same case's other metrics, its other configs and the collectives."""
    before = case_values(session, cache, regression.last_good_run_id)
    after = case_values(session, cache, regression.first_bad_run_id)
    key = BenchmarkKey.of_benchmark(regression.series.benchmark)
    metric = regression.series.metric.name
    readings = {
        name: Reading(before.get(key, {}).get(name), value)
        for name, value in after.get(key, {}).items()
    }
    hints = metric_hints(metric, readings)
    siblings = {  # the same case under the other compiler configs
        other.config: Reading(before.get(other, {}).get(metric), values.get(metric))
        for other, values in after.items()
        if other.config != key.config and other._replace(config=key.config) == key
    }
    if hint := config_hint(key.config, regression.rel_change, siblings):
        hints.append(hint)
    collectives = {  # the runs' all-reduce cases: their bandwidth tells of the interconnect
        case_label(other.model, other.params_json): {
            name: Reading(before.get(other, {}).get(name), values[name])
            for name in COLLECTIVE_METRICS & values.keys()
        }
        for other, values in after.items()
        if COLLECTIVE_METRICS & values.keys()
    }
    series = regression.series
    scope = Scope(
        key.config,
        series.benchmark.compiler_config.options,
        series.machine.gpu_count,
        collective=bool(COLLECTIVE_METRICS & after.get(key, {}).keys()),
    )
    found = kernels.step_diff(
        session,
        regression.last_good_run_id,
        regression.first_bad_run_id,
        series.benchmark_id,
        regression.kernel_way,
    )
    return [
        *hints,
        *root_cause_hints(regression.direction, scope, readings, collectives, found),
        *(kernel_hints(found) if found is not None else []),
    ]
