"""The hardware sampler: real psutil readings on CPU; NVML and AMD SMI through fake modules."""

import logging
import sys
import time
import types
from pathlib import Path
from typing import Any

import pytest
import torch

from workers.sampler import HardwareSampler, energy_from_power, summarize

PSUTIL_METRICS = ["cpu_utilization", "host_rss"]
NVML_METRICS = sorted(
    [
        *PSUTIL_METRICS,
        "gpu_utilization",
        "memory_bandwidth_utilization",
        "gpu_memory_used",
        "power",
        "energy",
        "temperature",
        "sm_clock",
        "memory_clock",
        "pcie_rx",
        "pcie_tx",
        "throttle_events",
        "ecc_errors",
    ]
)
SLOW = 60.0  # no tick from the thread: exactly two readings, at the start and at the stop


def by_metric(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {row["metric"]: row for row in rows}


class NVMLError(Exception):
    """pynvml's error: its value is an NVML_ERROR_* code (3: not supported)."""

    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value


class FakeNVML(types.ModuleType):
    """The pynvml functions the sampler calls, in NVML's units; `tick` picks each reading."""

    NVMLError = NVMLError
    NVML_TEMPERATURE_GPU = 0
    NVML_CLOCK_SM, NVML_CLOCK_MEM = 1, 2
    NVML_PCIE_UTIL_TX_BYTES, NVML_PCIE_UTIL_RX_BYTES = 0, 1
    NVML_VOLATILE_ECC = 0
    NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 0, 1

    def __init__(self, unsupported: frozenset[str] = frozenset()) -> None:
        super().__init__("pynvml")
        self.unsupported = unsupported
        self.tick = 0
        self.calls: list[tuple[str, Any]] = []

    def _read(self, name: str, values: tuple[Any, Any]) -> Any:
        if name in self.unsupported:
            raise NVMLError(3)
        return values[self.tick]

    def nvmlInit(self) -> None:
        self.calls.append(("init", None))

    def nvmlShutdown(self) -> None:
        self.calls.append(("shutdown", None))

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:
        self.calls.append(("index", index))
        return f"handle-{index}"

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> str:
        self.calls.append(("uuid", uuid))
        return uuid

    def nvmlDeviceGetUtilizationRates(self, handle: str) -> types.SimpleNamespace:
        gpu, memory = self._read("util", ((50, 20), (70, 40)))
        return types.SimpleNamespace(gpu=gpu, memory=memory)

    def nvmlDeviceGetMemoryInfo(self, handle: str) -> types.SimpleNamespace:
        return types.SimpleNamespace(used=self._read("memory", (2_000_000_000, 5_000_000_000)))

    def nvmlDeviceGetPowerUsage(self, handle: str) -> int:
        return int(self._read("power", (240_000, 260_000)))  # mW

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: str) -> int:
        return int(self._read("energy", (1_000_000, 1_012_500)))  # mJ since the driver loaded

    def nvmlDeviceGetTemperature(self, handle: str, sensor: int) -> int:
        assert sensor == self.NVML_TEMPERATURE_GPU
        return int(self._read("temperature", (60, 64)))

    def nvmlDeviceGetClockInfo(self, handle: str, kind: int) -> int:
        return int(self._read("clock", ((0, 1400, 2619), (0, 1600, 2619)))[kind])

    def nvmlDeviceGetPcieThroughput(self, handle: str, counter: int) -> int:
        return int(self._read("pcie", ((500, 1000), (500, 3000)))[counter])  # KB/s

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: str) -> int:
        return int(self._read("reasons", (0x1, 0x1 | 0x4)))  # idle, then idle + SW power cap

    def nvmlDeviceGetTotalEccErrors(self, handle: str, kind: int, counter: int) -> int:
        assert counter == self.NVML_VOLATILE_ECC
        return int(self._read("ecc", ((3, 0), (5, 1)))[kind])


@pytest.fixture
def nvml(monkeypatch: pytest.MonkeyPatch) -> FakeNVML:
    fake = FakeNVML()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return fake


def test_cpu_reads_this_process_with_psutil(nvml: FakeNVML) -> None:
    with HardwareSampler(torch.device("cpu"), interval_s=0.02) as sampler:
        deadline = time.monotonic() + 0.3
        while time.monotonic() < deadline:  # keep a core busy
            sum(i * i for i in range(1000))
    rows = by_metric(sampler.rows())
    assert sampler.source == "psutil"
    assert sampler.available == PSUTIL_METRICS
    assert sorted(rows) == PSUTIL_METRICS
    cpu, rss = rows["cpu_utilization"], rows["host_rss"]
    assert len(cpu["samples"]) >= 3
    assert cpu["value"] > 5  # a busy loop, in % of one core (shared with others in CI)
    assert cpu["value"] == pytest.approx(sum(cpu["samples"]) / len(cpu["samples"]))
    assert 0 < rss["value"] < 1000  # GB
    assert rss["value"] == max(rss["samples"])
    assert cpu["extra"] == {"source": "psutil", "interval_s": 0.02}
    assert all("unit" not in row for row in rows.values())
    assert nvml.calls == []  # a CPU device never opens NVML


def test_nvml_readings_in_the_vocabularys_units(nvml: FakeNVML) -> None:
    with HardwareSampler("cuda", interval_s=SLOW) as sampler:
        nvml.tick = 1
    rows = by_metric(sampler.rows())
    assert sampler.source == "nvml"
    assert sampler.available == NVML_METRICS
    values = {metric: row["value"] for metric, row in rows.items() if metric not in PSUTIL_METRICS}
    assert values == {
        "gpu_utilization": 60.0,
        "memory_bandwidth_utilization": 30.0,
        "gpu_memory_used": 5.0,  # peak, GB
        "power": 250.0,  # W, from mW
        "energy": 12.5,  # J, counter difference in mJ
        "temperature": 62.0,
        "sm_clock": 1500.0,
        "memory_clock": 2619.0,
        "pcie_rx": 2.0,  # MB/s, from KB/s
        "pcie_tx": 0.5,
        "throttle_events": 1.0,  # idle alone does not count
        "ecc_errors": 3.0,  # (5 + 1) - (3 + 0)
    }
    assert rows["power"]["samples"] == [240.0, 260.0]
    assert rows["throttle_events"]["extra"]["reasons"] == ["sw_power_cap"]
    assert rows["energy"]["extra"] == {"source": "nvml", "interval_s": SLOW, "method": "counter"}
    assert rows["host_rss"]["extra"]["source"] == "psutil"
    assert nvml.calls == [("init", None), ("index", 0), ("shutdown", None)]


def test_unsupported_nvml_readings_are_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    unsupported = frozenset({"energy", "ecc", "pcie", "reasons", "temperature"})
    monkeypatch.setitem(sys.modules, "pynvml", fake := FakeNVML(unsupported))
    before = time.monotonic()
    with HardwareSampler("cuda:0", interval_s=SLOW) as sampler:
        time.sleep(0.05)
        fake.tick = 1
    span = time.monotonic() - before
    rows = by_metric(sampler.rows())
    for metric in ("ecc_errors", "pcie_rx", "pcie_tx", "throttle_events", "temperature"):
        assert metric not in rows
        assert metric not in sampler.available
    # No energy counter: the trapezoid rule over power (250 W on average) over the span.
    assert 250 * 0.05 <= rows["energy"]["value"] <= 250 * span
    assert rows["energy"]["extra"]["method"] == "power_integral"
    assert rows["power"]["value"] == 250.0


def test_a_reading_that_fails_after_reading_is_kept(nvml: FakeNVML) -> None:
    with HardwareSampler("cuda:0", interval_s=SLOW) as sampler:
        nvml.unsupported = frozenset({"temperature"})
        sampler._tick()  # a passing failure (a timeout, say) skips this tick only
        nvml.unsupported = frozenset()
        nvml.tick = 1
    assert by_metric(sampler.rows())["temperature"]["samples"] == [60.0, 64.0]


def test_visible_devices_map_to_nvml_indices(
    nvml: FakeNVML, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    with HardwareSampler("cuda:1", interval_s=SLOW):
        pass
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-8f0c7c1e")
    with HardwareSampler("cuda", interval_s=SLOW):
        pass
    assert ("index", 3) in nvml.calls
    assert ("uuid", "GPU-8f0c7c1e") in nvml.calls


def test_without_pynvml_only_psutil(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import raises ImportError
    with caplog.at_level(logging.WARNING), HardwareSampler("cuda", interval_s=SLOW) as sampler:
        pass
    assert sampler.source == "psutil"
    assert sampler.available == PSUTIL_METRICS
    assert "pynvml" in caplog.text


def test_nvml_that_does_not_start_falls_back(
    nvml: FakeNVML, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_driver() -> None:
        raise NVMLError(9)  # NVML_ERROR_DRIVER_NOT_LOADED

    monkeypatch.setattr(nvml, "nvmlInit", no_driver)
    with HardwareSampler("cuda", interval_s=SLOW) as sampler:
        pass
    assert sampler.available == PSUTIL_METRICS
    assert nvml.calls == []  # not started, so not shut down


def test_amdsmi_import_keyerror_falls_back(
    nvml: FakeNVML, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Without ROCm, amdsmi's import fails looking up libamd_smi.so in a dict.
    (tmp_path / "amdsmi.py").write_text("raise KeyError('libamd_smi.so')\n")
    monkeypatch.syspath_prepend(tmp_path)
    monkeypatch.delitem(sys.modules, "amdsmi", raising=False)
    monkeypatch.setattr(torch.version, "hip", "6.2.41133")
    with HardwareSampler("cuda", interval_s=SLOW) as sampler:
        pass
    assert sampler.source == "psutil"
    assert sampler.available == PSUTIL_METRICS
    assert nvml.calls == []  # a ROCm build never tries NVML


class AmdSmiException(Exception):
    pass


class FakeAmdSmi(types.ModuleType):
    """The amdsmi functions the sampler calls; AMD SMI says "N/A" for what is unsupported."""

    AmdSmiException = AmdSmiException
    AmdSmiTemperatureType = types.SimpleNamespace(EDGE=0, HOTSPOT=1)
    AmdSmiTemperatureMetric = types.SimpleNamespace(CURRENT=0)
    AmdSmiClkType = types.SimpleNamespace(GFX=0, MEM=5)

    def __init__(self) -> None:
        super().__init__("amdsmi")
        self.tick = 0
        self.calls: list[str] = []

    def amdsmi_init(self) -> None:
        self.calls.append("init")

    def amdsmi_shut_down(self) -> None:
        self.calls.append("shut_down")

    def amdsmi_get_processor_handles(self) -> list[str]:
        return ["gpu-0", "gpu-1"]

    def amdsmi_get_gpu_activity(self, handle: str) -> dict[str, Any]:
        assert handle == "gpu-1"
        return {"gfx_activity": (80, 100)[self.tick], "umc_activity": "N/A", "mm_activity": 0}

    def amdsmi_get_gpu_vram_usage(self, handle: str) -> dict[str, Any]:
        return {"vram_total": 196_592, "vram_used": (1024, 2048)[self.tick]}  # MiB

    def amdsmi_get_power_info(self, handle: str) -> dict[str, Any]:
        return {"current_socket_power": "N/A", "average_socket_power": 300}  # W

    def amdsmi_get_energy_count(self, handle: str) -> dict[str, Any]:
        ticks = (1000, 1500)[self.tick]
        return {"energy_accumulator": ticks, "counter_resolution": 1000.0, "timestamp": 0}

    def amdsmi_get_temp_metric(self, handle: str, sensor: int, metric: int) -> int:
        if sensor != self.AmdSmiTemperatureType.HOTSPOT:
            raise AmdSmiException("not supported")
        return (55, 57)[self.tick]

    def amdsmi_get_clock_info(self, handle: str, kind: int) -> dict[str, Any]:
        return {"clk": 2100 if kind == self.AmdSmiClkType.GFX else 1300, "min_clk": 500}

    def amdsmi_get_gpu_total_ecc_count(self, handle: str) -> dict[str, Any]:
        return {"correctable_count": (0, 2)[self.tick], "uncorrectable_count": 0}


def test_amdsmi_readings_in_the_vocabularys_units(
    nvml: FakeNVML, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "amdsmi", amd := FakeAmdSmi())
    monkeypatch.setattr(torch.version, "hip", "6.2.41133")
    with HardwareSampler("cuda:1", interval_s=SLOW) as sampler:
        amd.tick = 1
    rows = by_metric(sampler.rows())
    assert sampler.source == "amdsmi"
    values = {metric: row["value"] for metric, row in rows.items() if metric not in PSUTIL_METRICS}
    assert values == {
        "gpu_utilization": 90.0,
        "gpu_memory_used": pytest.approx(2048 * 2**20 / 1e9),
        "power": 300.0,
        "energy": 0.5,  # 500 ticks x 1000 uJ
        "temperature": 56.0,
        "sm_clock": 2100.0,
        "memory_clock": 1300.0,
        "ecc_errors": 2.0,
    }
    assert rows["sm_clock"]["extra"]["source"] == "amdsmi"
    assert amd.calls == ["init", "shut_down"]
    assert nvml.calls == []


def test_energy_from_power_is_the_trapezoid_rule() -> None:
    joules = energy_from_power([(10.0, 100.0), (11.0, 100.0), (13.0, 200.0)])
    assert joules == [(10.0, 0.0), (11.0, 100.0), (13.0, 400.0)]


def test_throttle_summary_names_reasons_and_ignores_idle() -> None:
    value, extra = summarize("throttle_events", [0x1, 0x0, 0x40, 0x1 | 0x4 | 0x800, 0x1])
    assert value == 2.0
    assert extra == {"reasons": ["sw_power_cap", "hw_thermal_slowdown", "0x800"]}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA or ROCm device")
def test_real_gpu_readings() -> None:
    pytest.importorskip("amdsmi" if torch.version.hip else "pynvml")
    cuda = torch.device("cuda")
    x = torch.randn(4096, 4096, device=cuda)
    with HardwareSampler(cuda, interval_s=0.02) as sampler:
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:
            x = torch.tanh(x @ x)
            torch.cuda.synchronize()
    rows = by_metric(sampler.rows())
    assert sampler.source == ("amdsmi" if torch.version.hip else "nvml")
    assert rows["gpu_memory_used"]["value"] > 0.06  # x alone is 64 MB
    assert 0 <= rows["gpu_utilization"]["value"] <= 100
    assert len(rows["gpu_utilization"]["samples"]) >= 3
    assert rows["power"]["value"] > 0
    assert rows["energy"]["value"] > 0
