"""Profiler figures: real CPU profiles (eager, compiled, autocast) and synthetic GPU events."""

import copy
import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import pytest
import torch
from torch._dynamo.utils import counters
from torch.profiler import DeviceType

from app.suite_runs.rows import PROFILE
from workers import profiling
from workers.profiling import (
    CALL_MARK,
    LAUNCH,
    MAX_CALLS,
    MIN_CALLS,
    PROFILE_BUDGET_S,
    PROFILE_KERNELS,
    WALL_MARK,
    _span_of,
    calls_for,
    profile_rows,
    quiet_kineto,
    summarize_spans,
)

CPU = torch.device("cpu")
DEVICE_ONLY = {"device_time", "kernel_launch_latency"}


def bf16_autocast() -> AbstractContextManager[Any]:
    return torch.autocast("cpu", dtype=torch.bfloat16)


def by_metric(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    assert len({r["metric"] for r in rows}) == len(rows), rows
    assert all("unit" not in r for r in rows)
    return {r["metric"]: r for r in rows}


def kernel_names(row: dict[str, Any]) -> list[str]:
    return [k["name"] for k in row["extra"]["top_kernels"]]


@pytest.fixture(scope="module")
def model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)
    ).eval()


@pytest.fixture(scope="module")
def x() -> torch.Tensor:
    return torch.randn(8, 16)


@pytest.fixture(scope="module")
def compiled(model: torch.nn.Module) -> Iterator[Callable[..., Any]]:
    yield torch.compile(model)
    torch._dynamo.reset()


def test_eager_cpu_counts_top_level_aten_ops(model: torch.nn.Module, x: torch.Tensor) -> None:
    rows = by_metric(profile_rows(model, (x,), CPU, precision="fp32", calls=2))
    assert set(rows) == {"kernel_count", "host_time"}
    count = rows["kernel_count"]
    assert count["value"] == 3.0  # linear, relu, linear; not their addmm, t, clamp_min
    assert count["extra"]["counted"] == "aten ops"
    top = count["extra"]["top_kernels"]
    assert "aten::addmm" in kernel_names(count)[:2]  # the matmuls carry the self time
    assert {"aten::linear", "aten::relu"} <= set(kernel_names(count))
    assert top[0]["calls"] == 2.0  # per call, not per profile
    assert top[0]["self_time_us"] > 0
    rounding = 0.00005 * len(top)  # each share is rounded to 4 decimals
    assert 0 < sum(k["share"] for k in top) <= 1 + rounding
    assert rows["host_time"]["value"] > 0


def test_autocast_overhead_only_under_amp(model: torch.nn.Module, x: torch.Tensor) -> None:
    amp = by_metric(profile_rows(model, (x,), CPU, bf16_autocast, precision="amp"))
    overhead = amp["autocast_overhead"]
    assert overhead["value"] > 0
    # first Linear: input, weight, bias; second: weight, bias (ReLU passes bf16 on)
    assert overhead["extra"]["cast_ops"] == 5.0
    assert overhead["value"] < amp["host_time"]["value"]
    assert not DEVICE_ONLY & set(amp)
    assert "aten::_to_copy" in kernel_names(amp["kernel_count"])
    for precision, context in (("fp32", nullcontext), ("bf16", bf16_autocast)):
        rows = profile_rows(model, (x,), CPU, context, precision=precision)
        assert "autocast_overhead" not in by_metric(rows)


def test_casts_the_model_makes_itself_are_not_autocast_overhead(x: torch.Tensor) -> None:
    rows = by_metric(profile_rows(lambda t: t.double().sum(), (x,), CPU, precision="amp"))
    assert rows["autocast_overhead"]["value"] == 0.0
    assert rows["autocast_overhead"]["extra"]["cast_ops"] == 0.0


def test_compiled_function_profiles_without_recompiling(
    compiled: Callable[..., Any], x: torch.Tensor
) -> None:
    def infer(t: torch.Tensor) -> torch.Tensor:  # an inference call sets its own grad mode
        with torch.no_grad():
            return compiled(t)  # type: ignore[no-any-return]

    infer(x)  # compiled and warmed by the caller, as the harness does
    graphs = counters["stats"]["unique_graphs"]
    rows = by_metric(profile_rows(infer, (x,), CPU, precision="fp32"))
    assert counters["stats"]["unique_graphs"] == graphs
    assert set(rows) == {"kernel_count", "host_time"}
    names = kernel_names(rows["kernel_count"])
    assert "aten::addmm" in names  # the extern matmuls
    assert "aten::linear" not in names  # decomposed: this is the compiled graph running
    assert 0 < rows["kernel_count"]["value"] < 3.0  # ReLU fused into a generated kernel
    assert rows["host_time"]["value"] > 0


def test_compiled_amp_reports_autocast_overhead(
    compiled: Callable[..., Any], x: torch.Tensor
) -> None:
    with bf16_autocast(), torch.no_grad():
        compiled(x)
    rows = by_metric(profile_rows(compiled, (x,), CPU, bf16_autocast, precision="amp"))
    assert rows["autocast_overhead"]["value"] >= 0  # the graph fuses its casts
    assert rows["kernel_count"]["value"] > 0


def test_kineto_chatter_stays_off_stderr(
    model: torch.nn.Module, x: torch.Tensor, capfd: pytest.CaptureFixture[str]
) -> None:
    profile_rows(model, (x,), CPU, precision="fp32", calls=1)
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")


def test_other_stderr_output_of_the_profiler_is_logged(
    capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="workers.profiling"), quiet_kineto():
        os.write(2, b"USDT:2026 x.cpp:52] profiler_start\nCUPTI_ERROR_NOT_INITIALIZED\n")
    assert capfd.readouterr().err == ""
    assert [r.getMessage() for r in caplog.records] == ["profiler: CUPTI_ERROR_NOT_INITIALIZED"]


def test_calls_must_be_positive(model: torch.nn.Module, x: torch.Tensor) -> None:
    with pytest.raises(ValueError, match="calls must be at least 1"):
        profile_rows(model, (x,), CPU, precision="fp32", calls=0)


def test_a_cheap_case_is_profiled_more_often_than_a_costly_one(
    model: torch.nn.Module, x: torch.Tensor, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert (MIN_CALLS, MAX_CALLS) == (3, 15)
    assert [calls_for(s) for s in (0.0, 1e-5, 0.005, 0.01, 0.02, 1.0)] == [15, 15, 10, 5, 3, 3]

    def costly(t: torch.Tensor) -> torch.Tensor:
        time.sleep(PROFILE_BUDGET_S)  # one call spends the whole budget, however busy the host
        return model(t)

    def profiled(fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
        return by_metric(profile_rows(fn, (x,), CPU, precision="fp32"))["kernel_count"]["extra"][
            PROFILE
        ]

    assert profiled(costly)["calls"] == MIN_CALLS
    # The model's call takes tens of microseconds, but a busy host can stretch any one call
    # past the budget: the clock says what the model costs here.
    monkeypatch.setattr(profiling, "_timed_call", lambda *args: 5e-5)
    cheap = profiled(model)
    assert cheap["calls"] == MAX_CALLS
    calls = {k["name"]: k["calls"] for k in cheap["kernels"]}
    assert calls["aten::addmm"] == 2.0  # still per call: one for each linear


def test_a_call_slowed_by_a_busy_host_does_not_cut_the_profiled_calls(
    model: torch.nn.Module, x: torch.Tensor, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A cheap warm-up, then a second call preempted for 40 ms: the cheaper one says the cost.
    timings = iter([0.002, 0.04])
    monkeypatch.setattr(profiling, "_timed_call", lambda *args: next(timings))
    rows = profile_rows(model, (x,), CPU, precision="fp32")
    assert by_metric(rows)["kernel_count"]["extra"][PROFILE]["calls"] == calls_for(0.002) == 15


@dataclass
class FakeEvent:
    """Stands in for torch's FunctionEvent: the attributes profiling reads."""

    name: str
    device_type: DeviceType = DeviceType.CPU
    cpu_parent: "FakeEvent | None" = None
    cpu_time_total: float = 0.0
    self_cpu_time_total: float = 0.0
    device_time_total: float = 0.0
    is_user_annotation: bool = False
    activity_type: str | None = None


def cpu(name: str, parent: FakeEvent | None, total: float, device: float = 0.0) -> FakeEvent:
    return FakeEvent(name, DeviceType.CPU, parent, total, total, device)


def gpu(name: str, us: float, activity: str | None = "kernel") -> FakeEvent:
    return FakeEvent(name, DeviceType.CUDA, device_time_total=us, activity_type=activity)


LONG_KERNEL = "void at::native::vectorized_elementwise_kernel<4, " + "x" * 300


def one_gpu_call() -> list[FakeEvent]:
    """One amp call on a GPU as kineto reports it: ops, runtime calls, device activity."""
    mark = cpu(CALL_MARK, None, 100.0)
    linear = cpu("aten::linear", mark, 60.0)
    cast = cpu("aten::to", linear, 12.0, device=3.0)
    inner = cpu("aten::_to_copy", cast, 10.0, device=3.0)
    addmm = cpu("aten::addmm", linear, 30.0, device=40.0)
    relu = cpu("aten::relu", mark, 10.0, device=5.0)
    return [
        mark,
        linear,
        cast,
        inner,
        cpu("cudaLaunchKernel", inner, 4.0),
        addmm,
        cpu("cuLaunchKernelEx", addmm, 6.0),
        relu,
        cpu("cudaLaunchKernel", relu, 5.0),
        cpu("aten::to", mark, 2.0),  # the model's own cast, outside any op: not autocast's
        cpu("aten::to", None, 1.0),  # outside the call
        cpu("cudaDeviceSynchronize", None, 50.0),  # a runtime call, not a launch
        gpu("void at::native::unrolled_elementwise_kernel<bf16>", 3.0),
        gpu("sm90_xmma_gemm_bf16bf16_bf16f32", 40.0),
        gpu(LONG_KERNEL, 5.0),
        gpu("Memcpy HtoD (Pageable -> Device)", 2.0, "gpu_memcpy"),
        gpu(CALL_MARK, 48.0, "gpu_user_annotation"),
        gpu("Instrumentation", 1.0, "overhead"),
    ]


def test_gpu_events_give_device_figures() -> None:
    spans = [_span_of(e) for e in one_gpu_call() + one_gpu_call()]
    rows = by_metric(summarize_spans(spans, 2, on_gpu=True, amp=True))
    assert set(rows) == {
        "kernel_count",
        "host_time",
        "device_time",
        "kernel_launch_latency",
        "autocast_overhead",
    }
    count = rows["kernel_count"]
    assert count["value"] == 3.0
    assert count["extra"]["counted"] == "device kernels"
    top = count["extra"]["top_kernels"]
    assert top[0] == {
        "name": "sm90_xmma_gemm_bf16bf16_bf16f32",
        "calls": 1.0,
        "self_time_us": 40.0,
        "share": 0.8333,
    }
    assert top[1]["name"] == LONG_KERNEL[:200]
    assert rows["device_time"]["value"] == pytest.approx(0.048)
    assert rows["device_time"]["extra"]["transfer_ms"] == pytest.approx(0.002)
    assert rows["host_time"]["value"] == pytest.approx(0.1)
    launch = rows["kernel_launch_latency"]
    assert launch["value"] == pytest.approx(5.0)
    assert launch["extra"] == {"launches": 6, "api": ["cuLaunchKernelEx", "cudaLaunchKernel"]}
    autocast = rows["autocast_overhead"]
    assert autocast["value"] == pytest.approx(0.003)  # the cast kernels' device time
    assert autocast["extra"]["host_ms"] == pytest.approx(0.012)
    assert autocast["extra"]["cast_ops"] == 1.0


def test_gpu_kernel_profile_lists_every_kernel_per_call() -> None:
    calls = [one_gpu_call(), one_gpu_call()]
    walls = [cpu(WALL_MARK, None, 150.0), cpu(WALL_MARK, None, 170.0)]
    for wall, events in zip(walls, calls, strict=True):
        events[0].cpu_parent = wall  # the call's mark, inside the wall's
    spans = [_span_of(e) for e in walls + calls[0] + calls[1]]
    rows = by_metric(summarize_spans(spans, 2, on_gpu=True, amp=False))
    profile = rows["kernel_count"]["extra"][PROFILE]
    assert (profile["timing"], profile["calls"], profile["wall_us"]) == ("device", 2, 160.0)
    assert profile["kernels"] == [
        {"name": "sm90_xmma_gemm_bf16bf16_bf16f32", "calls": 1.0, "time_us": 40.0, "graph": ""},
        {"name": LONG_KERNEL, "calls": 1.0, "time_us": 5.0, "graph": ""},
        {
            "name": "void at::native::unrolled_elementwise_kernel<bf16>",
            "calls": 1.0,
            "time_us": 3.0,
            "graph": "",
        },
    ]  # the copy, the annotation and the profiler's overhead are no kernels
    assert profile["other_us"] == 0.0


def test_a_long_profile_keeps_the_slowest_and_sums_the_rest() -> None:
    mark = cpu(CALL_MARK, None, 1000.0)
    region = cpu("Torch-Compiled Region: 2/1", mark, 900.0)
    ops = [cpu(f"cpp_fused_op{i}_{i}", region, float(i + 1)) for i in range(PROFILE_KERNELS + 5)]
    spans = [_span_of(e) for e in [mark, region, cpu("aten::mm", mark, 7.0), *ops]]
    profile = by_metric(summarize_spans(spans, 1, on_gpu=False, amp=False))["kernel_count"][
        "extra"
    ][PROFILE]
    assert profile["timing"] == "cpu_self"
    assert profile["wall_us"] == 1000.0  # no wall mark: the call's
    assert len(profile["kernels"]) == PROFILE_KERNELS
    assert profile["kernels"][0]["graph"] == "2/1"
    assert profile["other_us"] == 1 + 2 + 3 + 4 + 5 + 6  # the six fastest, past the list
    assert "Torch-Compiled Region: 2/1" not in {k["name"] for k in profile["kernels"]}


def test_a_call_the_host_preempted_does_not_make_its_kernels_slower() -> None:
    """Three CPU calls, the last preempted mid-softmax (0.7 ms of a 30 us kernel): the median
    of the calls is the figure, where their mean would show the kernel 8 times slower."""
    events: list[FakeEvent] = []
    calls = ((40.0, 30.0, True), (41.0, 32.0, False), (740.0, 700.0, False))
    for wall_us, softmax_us, extra in calls:
        wall = cpu(WALL_MARK, None, wall_us)
        mark = cpu(CALL_MARK, wall, wall_us - 1)
        outer = cpu("aten::softmax", mark, 0.0)
        events += [wall, mark, outer, cpu("aten::_softmax", outer, softmax_us)]
        if extra:  # a kernel only the first call ran
            events.append(cpu("aten::fill_", mark, 5.0))
    rows = summarize_spans([_span_of(e) for e in events], 3, on_gpu=False, amp=False)
    count = by_metric(rows)["kernel_count"]
    assert count["extra"]["top_kernels"][0] == {
        "name": "aten::_softmax",
        "calls": 1.0,
        "self_time_us": 32.0,
        "share": 1.0,
    }
    profile = count["extra"][PROFILE]
    kernels = {k["name"]: (k["calls"], k["time_us"]) for k in profile["kernels"]}
    assert kernels == {
        "aten::_softmax": (1.0, 32.0),
        "aten::softmax": (1.0, 0.0),
        "aten::fill_": (0.333, 0.0),  # the median call ran none of it
    }
    assert profile["wall_us"] == 41.0


def test_gpu_without_device_activity_says_why() -> None:
    events = [e for e in one_gpu_call() if e.device_type == DeviceType.CPU]
    rows = by_metric(summarize_spans([_span_of(e) for e in events], 1, on_gpu=True, amp=False))
    assert rows["host_time"]["value"] == pytest.approx(0.1)
    for metric in ("kernel_count", "device_time", "kernel_launch_latency"):
        assert rows[metric]["status"] == "skipped"
        assert "no device activity" in rows[metric]["reason"]


def test_cuda_graph_replay_has_no_launch_latency_row() -> None:
    events = [cpu(CALL_MARK, None, 20.0), gpu("triton_poi_fused_relu_0", 4.0)]
    events.append(cpu("cudaGraphLaunch", events[0], 8.0))
    rows = by_metric(summarize_spans([_span_of(e) for e in events], 1, on_gpu=True, amp=False))
    assert "kernel_launch_latency" not in rows
    assert rows["kernel_count"]["value"] == 1.0


def test_older_torch_events_are_read_by_name() -> None:
    """Before torch 2.5 events have no activity_type; before 2.4, cuda_time_total."""

    @dataclass
    class OldEvent:
        name: str
        cuda_time_total: float
        device_type: DeviceType = DeviceType.CUDA
        cpu_parent: None = None

    spans = [_span_of(OldEvent("Memset (Device)", 1.0)), _span_of(OldEvent("ampere_sgemm", 7.0))]
    assert [(s.kind, s.duration_us) for s in spans] == [("transfer", 1.0), ("kernel", 7.0)]


@pytest.mark.parametrize(
    ("name", "launch"),
    [
        ("cudaLaunchKernel", True),
        ("cudaLaunchKernelExC_v11060", True),
        ("cuLaunchKernel", True),
        ("cudaLaunchCooperativeKernel", True),
        ("hipLaunchKernel", True),
        ("hipExtModuleLaunchKernel", True),
        ("hipModuleLaunchKernel", True),
        ("cudaGraphLaunch", False),
        ("cudaLaunchHostFunc", False),
        ("cudaMemcpyAsync", False),
        ("aten::launch_kernel", False),
    ],
)
def test_launch_runtime_calls(name: str, launch: bool) -> None:
    assert bool(LAUNCH.match(name)) is launch


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA or ROCm device")
def test_real_gpu_profile(model: torch.nn.Module) -> None:
    cuda = torch.device("cuda")
    net, inputs = copy.deepcopy(model).to(cuda), (torch.randn(8, 16, device=cuda),)

    def amp() -> AbstractContextManager[Any]:
        return torch.autocast("cuda", dtype=torch.float16)

    rows = by_metric(profile_rows(net, inputs, cuda, amp, precision="amp"))
    assert rows["kernel_count"]["extra"]["counted"] == "device kernels"
    assert rows["kernel_count"]["value"] >= 3
    assert rows["device_time"]["value"] > 0
    assert rows["kernel_launch_latency"]["value"] > 0
    assert rows["autocast_overhead"]["value"] > 0
