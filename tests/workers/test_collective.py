"""All-reduce across spawned ranks: real gloo timings, the nccl-tests formula, failing ranks."""

import multiprocessing
import os
import time
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from workers import collective
from workers.collective import (
    CollectiveError,
    Job,
    Reports,
    bus_bandwidth,
    measure_allreduce,
    run_ranks,
)

CPU = torch.device("cpu")


def failing_rank(rank: int, job: Job, reports: Reports) -> None:
    """Rank 1 reports an error; rank 0 waits as if blocked in the collective."""
    if rank == 1:
        reports.put(collective.Report(rank, error="RuntimeError: no peer at the rendezvous"))
        return
    time.sleep(60)


def crashing_rank(rank: int, job: Job, reports: Reports) -> None:
    """Rank 1 dies without a word (as a segfault would); rank 0 waits."""
    if rank == 1:
        os._exit(3)
    time.sleep(60)


def silent_ranks(rank: int, job: Job, reports: Reports) -> None:
    """Every rank exits cleanly and nobody reports."""


def quick_job(timeout_s: float = 60) -> Job:
    return Job(
        port=0,
        world_size=2,
        backend="gloo",
        device_type="cpu",
        sizes=(4096,),
        repeats=1,
        warmup=0,
        timeout_s=timeout_s,
    )


def test_two_gloo_ranks_time_every_size() -> None:
    rows = measure_allreduce(CPU, repeats=7, warmup=2)
    sizes = [4 * 1024, 256 * 1024, 4 * 1024 * 1024]
    latency = {r["params"]["bytes"]: r for r in rows if r["metric"] == "allreduce_latency"}
    busbw = {r["params"]["bytes"]: r for r in rows if r["metric"] == "allreduce_bus_bandwidth"}
    assert len(rows) == 2 * len(sizes)
    assert sorted(latency) == sorted(busbw) == sizes
    for size in sizes:
        lat, bw = latency[size], busbw[size]
        assert lat["params"] == bw["params"] == {"bytes": size, "world_size": 2, "backend": "gloo"}
        assert len(lat["samples"]) == 7
        assert all(s > 0 for s in lat["samples"])
        assert lat["value"] == pytest.approx(sorted(lat["samples"])[3])
        assert bw["value"] > 0
        assert bw["value"] == pytest.approx(bus_bandwidth(size, lat["value"] / 1e6, 2))
        assert bw["extra"]["algorithm_bandwidth"] == pytest.approx(bw["value"])  # n=2: factor 1
        assert lat["extra"] == {"device": "cpu", "timed_rank": 0}
        assert "unit" not in lat
        assert "unit" not in bw


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA or ROCm device")
def test_cuda_ranks_use_nccl_or_say_why_not() -> None:
    rows = measure_allreduce(torch.device("cuda"), sizes=(1024 * 1024,), repeats=5)
    assert {r["metric"] for r in rows} == {"allreduce_latency", "allreduce_bus_bandwidth"}
    assert all(r["value"] > 0 for r in rows)
    if torch.cuda.device_count() >= 2:
        assert {r["params"]["backend"] for r in rows} == {"nccl"}
        assert {r["extra"]["device"] for r in rows} == {"cuda"}
    else:
        assert {r["params"]["backend"] for r in rows} == {"gloo"}
        assert "NCCL needs one device per rank" in rows[0]["extra"]["fallback"]


@pytest.mark.parametrize(
    ("size", "seconds", "world_size", "expected"),
    [
        (10**9, 1.0, 2, 1.0),  # n=2: busbw equals algbw
        (4 * 1024 * 1024, 0.002, 4, 4 * 1024 * 1024 / 0.002 / 1e9 * 1.5),
        (10**9, 0.5, 8, 2.0 * 1.75),
        (10**9, 1.0, 1, 0.0),  # one rank moves nothing over a link
    ],
)
def test_bus_bandwidth_follows_nccl_tests(
    size: int, seconds: float, world_size: int, expected: float
) -> None:
    assert bus_bandwidth(size, seconds, world_size) == pytest.approx(expected)


def test_impossible_timeout_fails_fast_and_stops_the_ranks() -> None:
    before, began = set(multiprocessing.active_children()), time.monotonic()
    with pytest.raises(CollectiveError, match=r"did not finish within 0\.05 s"):
        measure_allreduce(CPU, timeout_s=0.05)
    assert time.monotonic() - began < 10
    assert set(multiprocessing.active_children()) <= before


def test_a_failing_rank_is_reported_and_the_blocked_rank_terminated() -> None:
    before, began = set(multiprocessing.active_children()), time.monotonic()
    with pytest.raises(CollectiveError, match="rank 1 failed: RuntimeError: no peer"):
        run_ranks(quick_job(), target=failing_rank)
    assert time.monotonic() - began < 30  # not the 60 s rank 0 would sleep
    assert set(multiprocessing.active_children()) <= before


def test_a_rank_that_dies_silently_is_reported() -> None:
    before = set(multiprocessing.active_children())
    with pytest.raises(CollectiveError, match="rank 1 exited with code 3 without a report"):
        run_ranks(quick_job(), target=crashing_rank)
    assert set(multiprocessing.active_children()) <= before


def test_ranks_that_exit_without_timings_do_not_wait_for_the_timeout() -> None:
    began = time.monotonic()
    with pytest.raises(CollectiveError, match="rank 0 sent no timings"):
        run_ranks(quick_job(timeout_s=120), target=silent_ranks)
    assert time.monotonic() - began < 30


def test_missing_torch_distributed_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.distributed, "is_available", lambda: False)
    with pytest.raises(CollectiveError, match=r"torch\.distributed is not available"):
        measure_allreduce(CPU)


def test_a_daemonic_caller_is_told_to_use_a_subprocess(monkeypatch: pytest.MonkeyPatch) -> None:
    # Celery's prefork children are daemonic, and multiprocessing forbids them children.
    monkeypatch.setattr(multiprocessing, "current_process", lambda: SimpleNamespace(daemon=True))
    with pytest.raises(CollectiveError, match="daemonic"):
        measure_allreduce(CPU)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"sizes": (4096, 1002)},
        {"sizes": ()},
        {"sizes": (4096, 4096)},
        {"world_size": 1},
        {"repeats": 0},
        {"timeout_s": 0},
    ],
)
def test_arguments_are_checked_before_spawning(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="must"):
        measure_allreduce(CPU, **kwargs)
