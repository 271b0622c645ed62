"""Hardware readings taken beside a benchmark case, said as result rows.

A daemon thread reads the GPU (NVML through ``pynvml`` on CUDA, AMD SMI through ``amdsmi`` on
ROCm) and this process (psutil) at a fixed rate, and once more at the start and at the stop.
A reading the device does not support is left out, never reported as 0. Row values: the mean
over ticks for rates, utilisation, clocks, temperature and power; the peak for memory; the
total over the span for energy, ECC errors and throttled ticks.
"""

import functools
import importlib
import itertools
import logging
import operator
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import psutil
import torch

logger = logging.getLogger(__name__)

Reader = Callable[[], float | None]  # None: no reading this tick, which is not an error
MAX_SAMPLES = 1000
PEAK = frozenset({"gpu_memory_used", "host_rss"})
DELTA = frozenset({"energy", "ecc_errors"})  # cumulative counters: last minus first
# nvmlClocksEventReason* bits (nvml.h): bit 0, GpuIdle, is not throttling.
THROTTLE_REASONS = {
    0x2: "applications_clocks_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
    0x10: "sync_boost", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown", 0x100: "display_clock_setting", 0x200: "board_limit",
    0x400: "reliability",
}  # fmt: skip


@dataclass
class Source:
    """A library that gives readings: one reader per metric, its error types, a close hook."""

    name: str
    readers: dict[str, Reader]
    errors: tuple[type[BaseException], ...]
    close: Callable[[], object] = lambda: None


class _Call:
    """A reader: call a library function, pick a field, scale it to the vocabulary's unit."""

    def __init__(self, fn: Callable[..., Any], *args: Any, field: str = "", scale: float = 1.0):
        self.fn, self.args, self.field, self.scale = fn, args, field, scale

    def __call__(self) -> float:
        result = self.fn(*self.args)
        if isinstance(result, dict):  # AMD SMI: a dict, "N/A" where unsupported
            return _number(result, *self.field.split("|")) * self.scale
        return float(getattr(result, self.field) if self.field else result) * self.scale


def _number(info: dict[str, Any], *keys: str) -> float:
    """The first of ``keys`` that holds a number."""
    for key in keys:
        if isinstance(value := info.get(key), int | float):
            return float(value)
    raise ValueError(f"none of {keys} holds a number in {info}")


class _CpuPercent:
    """CPU time of this process over wall time since the last call, in % of one core."""

    def __init__(self, process: Any) -> None:
        self.process = process
        self.last: tuple[float, float] | None = None  # the first call only starts the clock

    def __call__(self) -> float | None:
        times = self.process.cpu_times()
        now, cpu_s = time.monotonic(), float(times.user + times.system)
        last, self.last = self.last, (now, cpu_s)
        return None if last is None else 100.0 * (cpu_s - last[1]) / max(now - last[0], 1e-9)


def psutil_source() -> Source:
    """CPU utilisation and resident memory (GB) of this process."""
    process = psutil.Process()
    readers: dict[str, Reader] = {
        "cpu_utilization": _CpuPercent(process),
        "host_rss": lambda: process.memory_info().rss / 1e9,
    }
    return Source("psutil", readers, (psutil.Error,))


def physical_index(index: int, variables: tuple[str, ...]) -> int | str:
    """The index (or UUID) that NVML or AMD SMI gives the process's ``index``-th device.

    CUDA and HIP number only the devices ``CUDA_VISIBLE_DEVICES`` (or ``HIP_VISIBLE_DEVICES``)
    lists; the management libraries number every device on the host.
    """
    for variable in variables:
        entries = [entry.strip() for entry in os.environ.get(variable, "").split(",")]
        if index < len(entries) and entries[index]:
            return int(entries[index]) if entries[index].isdigit() else entries[index]
    return index


def nvml_readers(n: ModuleType, h: object) -> dict[str, Reader]:
    """NVML readers in the vocabulary's units; NVML says mW, mJ, bytes and KB/s."""
    ecc_kinds = (n.NVML_MEMORY_ERROR_TYPE_CORRECTED, n.NVML_MEMORY_ERROR_TYPE_UNCORRECTED)
    pcie = n.nvmlDeviceGetPcieThroughput  # each call samples the link for 20 ms
    ecc = n.nvmlDeviceGetTotalEccErrors
    # Newer NVML says clock "event" reasons; older only "throttle" reasons.
    reasons = getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
        n, "nvmlDeviceGetCurrentClocksThrottleReasons", None
    )
    readers: dict[str, Reader] = {
        "gpu_utilization": _Call(n.nvmlDeviceGetUtilizationRates, h, field="gpu"),
        "memory_bandwidth_utilization": _Call(n.nvmlDeviceGetUtilizationRates, h, field="memory"),
        "gpu_memory_used": _Call(n.nvmlDeviceGetMemoryInfo, h, field="used", scale=1e-9),
        "power": _Call(n.nvmlDeviceGetPowerUsage, h, scale=1e-3),
        "energy": _Call(n.nvmlDeviceGetTotalEnergyConsumption, h, scale=1e-3),
        "temperature": _Call(n.nvmlDeviceGetTemperature, h, n.NVML_TEMPERATURE_GPU),
        "sm_clock": _Call(n.nvmlDeviceGetClockInfo, h, n.NVML_CLOCK_SM),
        "memory_clock": _Call(n.nvmlDeviceGetClockInfo, h, n.NVML_CLOCK_MEM),
        "pcie_rx": _Call(pcie, h, n.NVML_PCIE_UTIL_RX_BYTES, scale=1e-3),
        "pcie_tx": _Call(pcie, h, n.NVML_PCIE_UTIL_TX_BYTES, scale=1e-3),
        "ecc_errors": lambda: float(sum(ecc(h, k, n.NVML_VOLATILE_ECC) for k in ecc_kinds)),
    }
    if reasons is not None:
        readers["throttle_events"] = _Call(reasons, h)
    return readers


def nvml_source(index: int | str) -> Source | None:
    """NVML for one NVIDIA device, or None when the library or the device is missing."""
    try:
        n = importlib.import_module("pynvml")
    except ImportError:
        logger.warning("pynvml (nvidia-ml-py) is not installed: no GPU readings")
        return None
    try:
        n.nvmlInit()
    except n.NVMLError as exc:
        logger.warning("NVML did not start (%s): no GPU readings", exc)
        return None
    try:
        by_index = isinstance(index, int)
        h = (n.nvmlDeviceGetHandleByIndex if by_index else n.nvmlDeviceGetHandleByUUID)(index)
    except n.NVMLError as exc:
        logger.warning("NVML has no device %s (%s): no GPU readings", index, exc)
        n.nvmlShutdown()
        return None
    return Source("nvml", nvml_readers(n, h), (n.NVMLError,), n.nvmlShutdown)


def amdsmi_readers(a: ModuleType, h: object) -> dict[str, Reader]:
    """AMD SMI readers in the vocabulary's units; AMD SMI says W, MiB and uJ."""
    hotspot = (a.AmdSmiTemperatureType.HOTSPOT, a.AmdSmiTemperatureMetric.CURRENT)
    clock, activity = a.amdsmi_get_clock_info, a.amdsmi_get_gpu_activity
    vram, power = a.amdsmi_get_gpu_vram_usage, a.amdsmi_get_power_info
    ecc_kinds = ("correctable_count", "uncorrectable_count")
    return {
        "gpu_utilization": _Call(activity, h, field="gfx_activity"),
        "memory_bandwidth_utilization": _Call(activity, h, field="umc_activity"),
        "gpu_memory_used": _Call(vram, h, field="vram_used", scale=2**20 / 1e9),
        "power": _Call(power, h, field="current_socket_power|socket_power|average_socket_power"),
        "energy": lambda: _amd_joules(a.amdsmi_get_energy_count(h)),
        "temperature": _Call(a.amdsmi_get_temp_metric, h, *hotspot),
        "sm_clock": _Call(clock, h, a.AmdSmiClkType.GFX, field="clk|cur_clk"),
        "memory_clock": _Call(clock, h, a.AmdSmiClkType.MEM, field="clk|cur_clk"),
        "ecc_errors": lambda: sum(
            _number(a.amdsmi_get_gpu_total_ecc_count(h), kind) for kind in ecc_kinds
        ),
    }


def _amd_joules(count: dict[str, Any]) -> float:
    """Energy counter ticks x resolution (uJ), in J; before ROCm 6.2 the ticks were "power"."""
    ticks = _number(count, "energy_accumulator", "power")
    return ticks * _number(count, "counter_resolution") / 1e6


def amdsmi_source(index: int | str) -> Source | None:
    """AMD SMI for one AMD device, or None when the library or the device is missing."""
    try:
        # Without ROCm, importing amdsmi raises KeyError (no libamd_smi.so), not ImportError.
        a = importlib.import_module("amdsmi")
        a.amdsmi_init()
    except Exception as exc:
        logger.warning("AMD SMI did not start (%r): no GPU readings", exc)
        return None
    try:
        h = a.amdsmi_get_processor_handles()[int(index)]
    except Exception as exc:
        logger.warning("AMD SMI has no device %s (%r): no GPU readings", index, exc)
        a.amdsmi_shut_down()
        return None
    errors = (a.AmdSmiException, KeyError, TypeError, ValueError)
    return Source("amdsmi", amdsmi_readers(a, h), errors, a.amdsmi_shut_down)


def gpu_source(device: torch.device) -> Source | None:
    """The management library for ``device``: AMD SMI on ROCm builds, NVML on CUDA, else None."""
    if device.type != "cuda":
        return None
    if torch.version.hip:
        variables = ("HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")
        return amdsmi_source(physical_index(device.index or 0, variables))
    return nvml_source(physical_index(device.index or 0, ("CUDA_VISIBLE_DEVICES",)))


def summarize(metric: str, values: list[float]) -> tuple[float, dict[str, Any]]:
    """One metric's value over the span from its readings, and what its ``extra`` adds."""
    if metric in DELTA:
        return values[-1] - values[0], {}
    if metric == "throttle_events":
        active = [int(mask) & ~1 for mask in values]  # bit 0: idle
        seen = functools.reduce(operator.or_, active, 0)
        reasons = [name for bit, name in THROTTLE_REASONS.items() if seen & bit]
        if unnamed := seen & ~sum(THROTTLE_REASONS):
            reasons.append(hex(unnamed))
        return float(sum(map(bool, active))), {"reasons": reasons}
    return (max(values) if metric in PEAK else sum(values) / len(values)), {}


def energy_from_power(power: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Joules used since the first reading, at each (time, watts) reading: the trapezoid rule."""
    steps = ((t1 - t0) * (w0 + w1) / 2 for (t0, w0), (t1, w1) in itertools.pairwise(power))
    joules = itertools.accumulate(steps, initial=0.0)
    return [(t, j) for (t, _), j in zip(power, joules, strict=True)]


class HardwareSampler:
    """Sample the device and this process while a ``with`` block runs; ``rows()`` after it.

    Example::

        with HardwareSampler(device, interval_s=0.05) as sampler:
            run_case()
        results.extend(sampler.rows())
    """

    def __init__(self, device: torch.device | str, interval_s: float = 0.1) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be positive")
        self.device = torch.device(device)
        self.interval_s = interval_s
        self.source = "psutil"  # the GPU library when one answered, else psutil
        self._sources: list[Source] = []
        self._points: dict[str, list[tuple[float, float]]] = {}  # metric -> (time, reading)
        self._origin: dict[str, str] = {}  # metric -> source name
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hardware-sampler", daemon=True)

    def __enter__(self) -> "HardwareSampler":
        gpu = gpu_source(self.device)
        self._sources = [psutil_source()] if gpu is None else [gpu, psutil_source()]
        self.source = self._sources[0].name
        self._tick()
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()
        self._tick()
        for source in self._sources:
            try:
                source.close()
            except source.errors as error:
                logger.warning("closing %s failed: %s", source.name, error)

    def _run(self) -> None:
        """Tick at a fixed rate until stopped; a slow tick delays the next one."""
        next_at = time.monotonic()
        while True:
            next_at = max(next_at + self.interval_s, time.monotonic())
            if self._stop.wait(next_at - time.monotonic()):
                return
            self._tick()

    def _tick(self) -> None:
        """Call every reader once; one that fails before its first reading is dropped."""
        now = time.monotonic()
        for source in self._sources:
            for metric, read in list(source.readers.items()):
                try:
                    value = read()
                except source.errors as error:
                    if metric not in self._points:
                        logger.debug("%s: no %s on this device (%s)", source.name, metric, error)
                        del source.readers[metric]
                    continue
                if value is not None:
                    with self._lock:
                        self._points.setdefault(metric, []).append((now, value))
                        self._origin[metric] = source.name

    @property
    def available(self) -> list[str]:
        """The metrics this sampler read, and so reports, sorted."""
        return sorted(row["metric"] for row in self.rows())

    def rows(self) -> list[dict[str, Any]]:
        """Result rows for the native payload: metric, value, samples, extra (no unit)."""
        with self._lock:
            points = {metric: list(series) for metric, series in self._points.items()}
        energy_method = "counter" if "energy" in points else "power_integral"
        if "energy" not in points and "power" in points:  # no energy counter on this device
            points["energy"] = energy_from_power(points["power"])
        rows = []
        for metric, series in sorted(points.items()):
            values = [value for _, value in series]
            if metric in DELTA and len(values) < 2:
                continue  # a difference needs two readings
            value, extra = summarize(metric, values)
            extra |= {"method": energy_method} if metric == "energy" else {}
            source = self._origin.get(metric, self.source)
            row: dict[str, Any] = {
                "metric": metric,
                "value": float(value),
                "extra": {"source": source, "interval_s": self.interval_s, **extra},
            }
            if metric not in DELTA and metric != "throttle_events":
                step = -(-len(values) // MAX_SAMPLES)  # ceil: at most MAX_SAMPLES, spread evenly
                row["samples"] = values[::step]
            rows.append(row)
        return rows
