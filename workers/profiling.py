"""Kernel- and framework-level figures of one case, from ``torch.profiler``, as result rows.

``profile_rows`` runs the case's function a few times under the profiler (CPU activity, plus
CUDA on a GPU; ROCm builds report HIP as CUDA), a cheap case more often than a costly one
(``calls_for``), and turns the events into native-payload rows:

- ``kernel_count`` (per call): on a GPU, device kernels (copies, sets and device-side
  annotations left out); on the CPU, the top-level aten ops, i.e. those not nested in another
  aten op (``aten::linear`` counts once, not with its ``aten::addmm``). Extra: the top kernels
  by self time (GPU: kernel duration; CPU: self CPU time of every aten op, nested ones too).
- ``host_time`` (ms per call): the wall time of each call on the host, measured by a
  ``record_function`` range around ``context()`` and ``fn(*args)``. It excludes
  the device synchronisation that follows, so on a GPU it is the time to issue the work.
  Profiling adds about a microsecond per recorded op, more to eager code than to compiled.
- ``device_time`` (ms per call, GPU only): the summed duration of the device kernels.
- ``kernel_launch_latency`` (us, GPU only): the mean CPU duration of the kernel-launch runtime
  calls (``cudaLaunchKernel``, ``cuLaunchKernel``, ``hipLaunchKernel``, ``hipModuleLaunchKernel``
  and their variants). Absent where nothing was launched that way (CUDA graph replays).
- ``autocast_overhead`` (ms per call, precision ``amp`` only): the casts autocast inserts, i.e.
  the outermost ``aten::to`` / ``aten::_to_copy`` ops nested inside another aten op (autocast
  casts from within the op it wraps; a cast the model itself makes sits outside any op). CPU:
  their inclusive CPU time; GPU: the device time of the kernels they launch (host time in
  extra). A compiled graph fuses its casts into its kernels, so it shows little or none.

The ``kernel_count`` row also carries the case's kernel profile (``extra["kernel_profile"]``,
which the run's payload keeps once, in ``kernel_profiles``): every kernel with its calls and
time per call (GPU: device kernels and their mean duration; CPU: aten ops and Inductor's
generated kernels, by self CPU time, the median over the calls), the slowest
``PROFILE_KERNELS`` of them by name and the rest summed, and the median wall time of a call
with its device work (``WALL_MARK``). Inductor's C++ kernels appear on the CPU only when
compiled with ``cpp.enable_kernel_profile`` (``workers.compile_configs`` sets it for CPU
compiles); a kernel inside a compiled region names its graph (dynamo's frame/compile id).

A GPU profile without any device activity (CUPTI or roctracer missing) gives ``skipped`` rows
for the device figures instead of zeros.
"""

import logging
import os
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import torch
from torch.profiler import DeviceType, ProfilerActivity, profile, record_function

from app.kernels.identity import identity_of
from app.suite_runs.rows import PROFILE

log = logging.getLogger(__name__)

CALL_MARK = "benchwatch::profiled_call"
WALL_MARK = "benchwatch::profiled_wall"  # around a call and its device synchronisation
CAST_OPS = frozenset(
    {
        "aten::to",
        "aten::_to_copy",
        "aten::_autocast_to_reduced_precision",
        "aten::_autocast_to_full_precision",
    }
)
# cudaLaunchKernel, cudaLaunchKernelExC, cuLaunchKernel(Ex), cudaLaunchCooperativeKernel,
# hipLaunchKernel, hipModuleLaunchKernel, hipExtModuleLaunchKernel, ...
LAUNCH = re.compile(r"^(?:cuda|cu|hip)\w*Launch\w*Kernel")
# Device activities that are not kernels; activity_type (torch 2.5+) says so directly.
TRANSFER_PREFIXES = ("Memcpy", "Memset", "CopyHostTo", "CopyDeviceTo", "FillBuffer")
TRANSFER_ACTIVITIES = frozenset({"gpu_memcpy", "gpu_memset"})
TOP_KERNELS = 10
# How many calls are profiled: as many as fit in PROFILE_BUDGET_S, between the two bounds. A
# kernel's host figure is the median over the calls, and a busy host preempts a cheap case's
# calls at random: two of three preempted calls move a median of three, not one of fifteen.
MIN_CALLS, MAX_CALLS = 3, 15
PROFILE_BUDGET_S = 0.05
NAME_LIMIT = 200
PROFILE_KERNELS = 200
PROFILE_NAME_LIMIT = 1000  # a C++ signature's name and template arguments fit
COMPILED_REGION = re.compile(r"^Torch-Compiled Region: (\d+/\d+)")
# Kineto writes these to stderr itself, at every profiler start and stop.
KINETO_NOISE = ("USDT:", "STAGE:")
# The allocator's note when memory profiling meets blocks from before it started (expected).
ALLOCATOR_NOTE = "allocated before the profiling started"


K = TypeVar("K")  # what kernels are told apart by: a name, or a name and a graph

# "cpu": an op, annotation or runtime call on the host; the rest are device activities
# ("annotation": a record_function range mirrored on the device; "other": profiler overhead).
Kind = Literal["cpu", "kernel", "transfer", "annotation", "other"]


@dataclass(frozen=True)
class Span:
    """One profiler event, reduced to what the figures need."""

    name: str
    kind: Kind
    duration_us: float
    self_us: float  # CPU events: time outside child events; device events: the duration
    device_us: float  # CPU events: device time of the kernels this op and its children launch
    ancestors: tuple[str, ...]  # enclosing CPU events, innermost first
    # The profiled call a CPU event ran in (its CALL_MARK event's identity), None outside one
    # and for device events.
    call: int | None = None

    @property
    def in_call(self) -> bool:
        """Whether the event ran inside one of the profiled calls."""
        return self.call is not None


def profile_rows(
    fn: Callable[..., Any],
    args: Sequence[Any],
    device: torch.device,
    context: Callable[[], AbstractContextManager[Any]] = nullcontext,
    *,
    precision: str,
    calls: int | None = None,
) -> list[dict[str, Any]]:
    """Rows of kernel count, host and device time, launch latency and autocast overhead.

    Args:
        fn: the case's call (it sets its own grad mode: an inference call runs under
            ``no_grad``, a training step does not), eager or already compiled; one
            unprofiled call precedes the profile all the same, so no compilation or first-call
            setup lands in it.
        args: its inputs, passed as ``fn(*args)``.
        device: where it runs; ``cuda`` adds device activity to the profile.
        context: makes the context each call runs in (``torch.autocast`` for ``amp``).
        precision: the case's precision; ``amp`` adds the ``autocast_overhead`` row.
        calls: profiled calls; every figure is per call. None: as many as an unprofiled
            call's time fits in ``PROFILE_BUDGET_S`` (``calls_for``).

    Returns:
        Rows ``{"metric", "value", "extra"}`` (or ``skipped`` rows with a reason).
    """
    if calls is not None and calls < 1:
        raise ValueError(f"calls must be at least 1, not {calls}")
    on_gpu = device.type == "cuda"
    seconds = _timed_call(fn, args, device, context)  # warm-up, unprofiled
    if calls is None:
        # The warm-up may have compiled or set up: a second call, where it was cheap, says
        # what a call costs, and costs no more than the budget. A busy host only ever adds
        # time, so the cheaper of the two is the nearer.
        if seconds < PROFILE_BUDGET_S:
            seconds = min(seconds, _timed_call(fn, args, device, context))
        calls = calls_for(seconds)
    spans = [_span_of(event) for event in _profiled_events(fn, args, device, context, calls)]
    return summarize_spans(spans, calls, on_gpu=on_gpu, amp=precision == "amp")


def calls_for(seconds: float) -> int:
    """How many calls of ``seconds`` each to profile: what fits the budget, within bounds."""
    fit = int(PROFILE_BUDGET_S / seconds) if seconds > 0 else MAX_CALLS
    return max(MIN_CALLS, min(MAX_CALLS, fit))


def summarize_spans(
    spans: Sequence[Span], calls: int, *, on_gpu: bool, amp: bool
) -> list[dict[str, Any]]:
    """The rows of ``profile_rows`` from the events of ``calls`` profiled calls."""
    rows = [_host_time_row(spans, calls)]
    if not on_gpu:
        rows.insert(0, _with_profile(_cpu_kernel_row(spans, calls), spans, calls, on_gpu))
    elif any(s.kind in ("kernel", "transfer") for s in spans):
        kernel_row = _with_profile(_gpu_kernel_row(spans, calls), spans, calls, on_gpu)
        rows = [kernel_row, *rows, _device_time_row(spans, calls)]
        rows += _launch_rows(spans)
    else:
        reason = "the profiler recorded no device activity (is CUPTI or roctracer available?)"
        rows += [
            {"metric": metric, "status": "skipped", "reason": reason}
            for metric in ("kernel_count", "device_time", "kernel_launch_latency")
        ]
    if amp:
        rows.append(_autocast_row(spans, calls, on_gpu=on_gpu))
    return rows


def _call(
    fn: Callable[..., Any], args: Sequence[Any], context: Callable[[], AbstractContextManager[Any]]
) -> None:
    with context():
        fn(*args)


def _timed_call(
    fn: Callable[..., Any],
    args: Sequence[Any],
    device: torch.device,
    context: Callable[[], AbstractContextManager[Any]],
) -> float:
    """Seconds of one call, its device work included."""
    start = time.perf_counter()
    _call(fn, args, context)
    _sync(device)
    return time.perf_counter() - start


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _profiled_events(
    fn: Callable[..., Any],
    args: Sequence[Any],
    device: torch.device,
    context: Callable[[], AbstractContextManager[Any]],
    calls: int,
) -> list[Any]:
    """The profiler's events (``FunctionEvent``) of ``calls`` calls, each under CALL_MARK."""
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    prof = profile(activities=activities, record_shapes=False)
    with quiet_kineto():
        prof.start()
    try:
        for _ in range(calls):
            with record_function(WALL_MARK):
                with record_function(CALL_MARK):
                    _call(fn, args, context)
                _sync(device)  # outside the call's mark: the kernels finish within the wall
    finally:
        with quiet_kineto():
            prof.stop()
    return list(prof.events())  # type: ignore[no-untyped-call]


@contextmanager
def quiet_kineto() -> Iterator[None]:
    """Keep kineto's start/stop chatter off stderr (fd 2); log whatever else it writes."""
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no stderr to guard
        yield
        return
    try:
        with tempfile.TemporaryFile() as sink:
            os.dup2(sink.fileno(), 2)
            try:
                yield
            finally:
                sys.stderr.flush()
                os.dup2(saved, 2)
                sink.seek(0)
                for line in sink.read().decode(errors="replace").splitlines():
                    noise = line.startswith(KINETO_NOISE) or ALLOCATOR_NOTE in line
                    if line.strip() and not noise:
                        log.warning("profiler: %s", line)
    finally:
        os.close(saved)


def _span_of(event: Any) -> Span:
    """A ``FunctionEvent`` (or anything with its attributes) as a Span."""
    ancestors = []
    call = None
    parent = event.cpu_parent
    while parent is not None:
        ancestors.append(str(parent.name))
        if parent.name == CALL_MARK:
            call = id(parent)  # every event is alive while the spans are made: ids are distinct
        parent = parent.cpu_parent
    if event.device_type == DeviceType.CPU:
        return Span(
            name=str(event.name),
            kind="cpu",
            duration_us=float(event.cpu_time_total),
            self_us=float(event.self_cpu_time_total),
            device_us=_device_time_us(event),
            ancestors=tuple(ancestors),
            call=call,
        )
    duration = _device_time_us(event)
    return Span(str(event.name), _device_kind(event), duration, duration, duration, ())


def _device_time_us(event: Any) -> float:
    """``device_time_total``, named ``cuda_time_total`` before torch 2.4."""
    for attribute in ("device_time_total", "cuda_time_total"):
        if hasattr(event, attribute):
            return float(getattr(event, attribute))
    return 0.0


def _device_kind(event: Any) -> Kind:
    """Kernel, transfer, annotation or other, by activity type (torch 2.5+) or else by name."""
    activity = getattr(event, "activity_type", None)
    if getattr(event, "is_user_annotation", False) or activity == "gpu_user_annotation":
        return "annotation"
    if activity:
        if activity in TRANSFER_ACTIVITIES:
            return "transfer"
        return "kernel" if activity == "kernel" else "other"
    return "transfer" if str(event.name).startswith(TRANSFER_PREFIXES) else "kernel"


def _cpu_kernel_row(spans: Sequence[Span], calls: int) -> dict[str, Any]:
    ops = [s for s in spans if s.kind == "cpu" and s.in_call and _is_aten(s.name)]
    top_level = [s for s in ops if not any(_is_aten(name) for name in s.ancestors)]
    return {
        "metric": "kernel_count",
        "value": len(top_level) / calls,
        "extra": {"counted": "aten ops", "top_kernels": _top_kernels(ops, calls)},
    }


def _gpu_kernel_row(spans: Sequence[Span], calls: int) -> dict[str, Any]:
    kernels = [s for s in spans if s.kind == "kernel"]
    return {
        "metric": "kernel_count",
        "value": len(kernels) / calls,
        "extra": {"counted": "device kernels", "top_kernels": _top_kernels(kernels, calls)},
    }


def _with_profile(
    row: dict[str, Any], spans: Sequence[Span], calls: int, on_gpu: bool
) -> dict[str, Any]:
    """The kernel_count row with the case's kernel profile in its extra."""
    return {**row, "extra": {**row["extra"], PROFILE: case_profile(spans, calls, on_gpu=on_gpu)}}


def case_profile(spans: Sequence[Span], calls: int, *, on_gpu: bool) -> dict[str, Any]:
    """Every kernel of the calls, per call, under the name the profiler gave it (payload form)."""
    if on_gpu:
        kernels = [s for s in spans if s.kind == "kernel"]
    else:
        kernels = [s for s in spans if s.kind == "cpu" and s.in_call and _is_cpu_kernel(s.name)]
    count, time_us = _per_kernel(
        kernels, calls, lambda s: (s.name[:PROFILE_NAME_LIMIT], _graph_of(s))
    )
    ranked = sorted(time_us, key=lambda key: (-time_us[key], key))
    walls = [s for s in spans if s.kind == "cpu" and s.name == WALL_MARK]
    walls = walls or [s for s in spans if s.kind == "cpu" and s.name == CALL_MARK]
    wall_us = statistics.median([s.duration_us for s in walls]) if walls else 0.0
    return {
        "timing": "device" if on_gpu else "cpu_self",
        "calls": calls,
        "wall_us": round(wall_us, 3),
        "kernels": [
            {
                "name": name,
                "calls": round(count[(name, graph)] / calls, 3),
                "time_us": round(time_us[(name, graph)], 3),
                "graph": graph,
            }
            for name, graph in ranked[:PROFILE_KERNELS]
        ],
        "other_us": round(sum(time_us[key] for key in ranked[PROFILE_KERNELS:]), 3),
    }


def _per_kernel(
    spans: Sequence[Span], calls: int, key: Callable[[Span], K]
) -> tuple[dict[K, int], dict[K, float]]:
    """The spans' count and self time per kernel (``key``), in all and per call."""
    count: dict[K, int] = defaultdict(int)
    by_call: dict[K, dict[int | None, float]] = defaultdict(lambda: defaultdict(float))
    for s in spans:
        k = key(s)
        count[k] += 1
        by_call[k][s.call] += s.self_us
    return count, {k: _per_call(times, calls) for k, times in by_call.items()}


def _per_call(times: Mapping[int | None, float], calls: int) -> float:
    """A kernel's time per call from its time in each call (``Span.call``).

    Host events: the median over the calls, a call without the kernel counting 0, so one call
    a busy host preempted (milliseconds, where the kernel takes microseconds) does not make the
    kernel look slower. Device events (no call): their mean, which no preemption moves.
    """
    if None in times:
        return sum(times.values()) / calls
    return statistics.median([*times.values(), *[0.0] * (calls - len(times))])


def _is_cpu_kernel(name: str) -> bool:
    """An aten op or a kernel Inductor generated (a C++ kernel profiled by name)."""
    return _is_aten(name) or identity_of(name).kind in ("fused", "template")


def _graph_of(span: Span) -> str:
    """The compiled graph an event ran in (``0/1``), from its enclosing compiled region."""
    for name in span.ancestors:
        if (match := COMPILED_REGION.match(name)) is not None:
            return match[1]
    return ""


def _top_kernels(spans: Sequence[Span], calls: int) -> list[dict[str, Any]]:
    """The TOP_KERNELS names by self time per call (``_per_call``), with their calls."""
    count, self_us = _per_kernel(spans, calls, lambda s: s.name)
    total = sum(self_us.values())
    ranked = sorted(self_us, key=lambda name: (-self_us[name], name))[:TOP_KERNELS]
    return [
        {
            "name": name[:NAME_LIMIT],
            "calls": round(count[name] / calls, 3),
            "self_time_us": round(self_us[name], 3),
            "share": round(self_us[name] / total, 4) if total > 0 else 0.0,
        }
        for name in ranked
    ]


def _host_time_row(spans: Sequence[Span], calls: int) -> dict[str, Any]:
    marks = [s for s in spans if s.kind == "cpu" and s.name == CALL_MARK]
    if len(marks) != calls:
        raise RuntimeError(f"the profiler recorded {len(marks)} of {calls} calls")
    return {
        "metric": "host_time",
        "value": sum(s.duration_us for s in marks) / calls / 1000.0,
        "extra": {"measured": "wall time of each call on the host, without device sync"},
    }


def _device_time_row(spans: Sequence[Span], calls: int) -> dict[str, Any]:
    kernels = sum(s.duration_us for s in spans if s.kind == "kernel")
    transfers = sum(s.duration_us for s in spans if s.kind == "transfer")
    return {
        "metric": "device_time",
        "value": kernels / calls / 1000.0,
        "extra": {"transfer_ms": transfers / calls / 1000.0},
    }


def _launch_rows(spans: Sequence[Span]) -> list[dict[str, Any]]:
    launches = [s for s in spans if s.kind == "cpu" and LAUNCH.match(s.name)]
    if not launches:
        return []
    return [
        {
            "metric": "kernel_launch_latency",
            "value": sum(s.duration_us for s in launches) / len(launches),
            "extra": {"launches": len(launches), "api": sorted({s.name for s in launches})},
        }
    ]


def _autocast_row(spans: Sequence[Span], calls: int, *, on_gpu: bool) -> dict[str, Any]:
    casts = [
        s
        for s in spans
        if s.kind == "cpu"
        and s.in_call
        and s.name in CAST_OPS
        and not CAST_OPS.intersection(s.ancestors)
        and any(_is_aten(name) for name in s.ancestors)
    ]
    host_ms = sum(s.duration_us for s in casts) / calls / 1000.0
    extra: dict[str, Any] = {"cast_ops": len(casts) / calls}
    if on_gpu:
        value = sum(s.device_us for s in casts) / calls / 1000.0
        extra |= {"measured": "device time of the cast kernels", "host_ms": host_ms}
    else:
        value = host_ms
        extra["measured"] = "cpu time of the cast ops"
    return {"metric": "autocast_overhead", "value": value, "extra": extra}


def _is_aten(name: str) -> bool:
    return name.startswith("aten::")
