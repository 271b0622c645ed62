"""All-reduce latency and bus bandwidth across local processes, as nccl-tests define them.

``measure_allreduce`` spawns ``world_size`` processes that rendezvous over a free localhost TCP
port and all-reduce (SUM) a float32 tensor of each message size: warm-up calls, then timed
calls, each preceded by a device synchronisation and a barrier so that every rank enters the
collective together. Rank 0's times are the result.

Bus bandwidth follows nccl-tests (``doc/PERFORMANCE.md``): the algorithm bandwidth
``bytes / time`` times ``2 (n - 1) / n``, the share of the data each rank's link carries in a
ring all-reduce, so the figure compares across world sizes and with the links' peak speed.

Backends: gloo on CPU; NCCL on CUDA (RCCL on ROCm builds) with one GPU per rank. NCCL refuses
two ranks on one device, so with fewer GPUs than ranks the ranks use gloo on CPU tensors and
``extra["fallback"]`` says why; ``params["backend"]`` keeps the two series apart.
"""

import multiprocessing
import queue
import signal
import socket
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from multiprocessing.process import BaseProcess
from multiprocessing.queues import Queue
from typing import Any, TypeAlias

import torch
import torch.distributed as dist
import torch.multiprocessing as torch_mp

KIB = 1024
MIB = 1024 * KIB
DEFAULT_SIZES = (4 * KIB, 256 * KIB, 4 * MIB)
FLOAT32_BYTES = 4
POLL_S = 0.05  # how often the parent looks for a report, a dead rank or the deadline
GRACE_S = 5.0  # how long finished ranks get to leave the process group before terminate()


class CollectiveError(RuntimeError):
    """The collective benchmark could not run: unavailable, a rank failed, or it timed out."""


@dataclass(frozen=True)
class Job:
    """What every rank runs; pickled to the spawned processes."""

    port: int
    world_size: int
    backend: str  # "gloo" or "nccl"
    device_type: str  # where the tensors live: "cpu" or "cuda" (rank r uses cuda:r)
    sizes: tuple[int, ...]  # message sizes in bytes
    repeats: int
    warmup: int
    timeout_s: float


Timings = dict[int, list[float]]  # message bytes -> seconds of each timed call


@dataclass(frozen=True)
class Report:
    """A rank's message to the parent: rank 0's timings, or any rank's failure."""

    rank: int
    timings: Timings | None = None
    error: str | None = None


Reports: TypeAlias = "Queue[Report]"  # multiprocessing.Queue is generic only to type checkers
Target = Callable[[int, Job, Reports], None]


def bus_bandwidth(size_bytes: int, seconds: float, world_size: int) -> float:
    """All-reduce bus bandwidth in GB/s (decimal), as nccl-tests computes it.

    ``algbw = size_bytes / seconds``; ``busbw = algbw * 2 (n - 1) / n``: a ring all-reduce
    sends and receives ``2 (n - 1) / n`` times the message on each rank's link.
    """
    algbw = size_bytes / seconds / 1e9
    return algbw * 2 * (world_size - 1) / world_size


def measure_allreduce(
    device: torch.device,
    *,
    sizes: Sequence[int] = DEFAULT_SIZES,
    world_size: int = 2,
    repeats: int = 20,
    warmup: int = 5,
    timeout_s: float = 120,
) -> list[dict[str, Any]]:
    """Latency (us) and bus bandwidth (GB/s) rows of an all-reduce per message size.

    Spawns ``world_size`` processes; the call, process start-up included, ends within about
    ``timeout_s`` or raises ``CollectiveError``, as it does when a rank fails.

    Args:
        device: ``cpu`` for gloo; ``cuda`` for NCCL/RCCL on ``cuda:0`` .. ``cuda:{n-1}``.
        sizes: message sizes in bytes, each a positive multiple of 4 (float32 elements).
        world_size: number of ranks, at least 2.
        repeats: timed calls per size (the latency row's samples).
        warmup: untimed calls per size before the timed ones.
        timeout_s: limit for the whole measurement, and for each collective in the ranks.
    """
    _check_arguments(sizes, world_size, repeats, warmup, timeout_s)
    backend, device_type, fallback = _choose_backend(device, world_size)
    job = Job(
        port=_free_port(),
        world_size=world_size,
        backend=backend,
        device_type=device_type,
        sizes=tuple(sizes),
        repeats=repeats,
        warmup=warmup,
        timeout_s=timeout_s,
    )
    extra: dict[str, Any] = {"device": device_type, "timed_rank": 0}
    if fallback is not None:
        extra["fallback"] = fallback
    return _rows(run_ranks(job), job, extra)


def _check_arguments(
    sizes: Sequence[int], world_size: int, repeats: int, warmup: int, timeout_s: float
) -> None:
    if not sizes or any(s <= 0 or s % FLOAT32_BYTES for s in sizes):
        raise ValueError(f"sizes must be positive multiples of {FLOAT32_BYTES} bytes: {sizes}")
    if len(set(sizes)) != len(sizes):
        raise ValueError(f"sizes must not repeat: {sizes}")
    if world_size < 2:
        raise ValueError(f"world_size must be at least 2, not {world_size}")
    if repeats < 1 or warmup < 0:
        raise ValueError(f"repeats must be >= 1 and warmup >= 0, not {repeats} and {warmup}")
    if timeout_s <= 0:
        raise ValueError(f"timeout_s must be positive, not {timeout_s}")


def _choose_backend(device: torch.device, world_size: int) -> tuple[str, str, str | None]:
    """Backend, tensor device type, and why the ranks fell back to gloo (None: they did not)."""
    if not dist.is_available():
        raise CollectiveError("torch.distributed is not available in this torch build")
    if device.type == "cuda":
        count = torch.cuda.device_count()
        if count >= world_size and dist.is_nccl_available():
            return "nccl", "cuda", None
        fallback = (
            f"{count} CUDA device(s) for {world_size} ranks: NCCL needs one device per rank"
            if dist.is_nccl_available()
            else "this torch build has no NCCL/RCCL"
        )
        return _gloo(), "cpu", f"{fallback}; gloo on CPU tensors"
    if device.type == "cpu":
        return _gloo(), "cpu", None
    raise CollectiveError(f"no all-reduce backend for device type {device.type!r}")


def _gloo() -> str:
    if not dist.is_gloo_available():
        raise CollectiveError("this torch build has no gloo backend")
    return "gloo"


def _free_port() -> int:
    """A localhost port free now; another process could take it before rank 0 binds it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _rows(timings: Timings, job: Job, extra: dict[str, Any]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for size in job.sizes:
        samples = [seconds * 1e6 for seconds in timings[size]]
        latency_us = statistics.median(samples)
        params = {"bytes": size, "world_size": job.world_size, "backend": job.backend}
        busbw = bus_bandwidth(size, latency_us / 1e6, job.world_size)
        algbw = size / (latency_us / 1e6) / 1e9
        rows += [
            {
                "metric": "allreduce_latency",
                "value": latency_us,
                "samples": samples,
                "params": params,
                "extra": dict(extra),
            },
            {
                "metric": "allreduce_bus_bandwidth",
                "value": busbw,
                "params": dict(params),
                "extra": {**extra, "algorithm_bandwidth": algbw},
            },
        ]
    return rows


def run_ranks(job: Job, target: Target | None = None) -> Timings:
    """Spawn one process per rank running ``target`` and return rank 0's timings.

    Raises ``CollectiveError`` when a rank reports a failure, dies, or the ranks outlive
    ``job.timeout_s``; every rank still running then is terminated (killed if need be).
    """
    if multiprocessing.current_process().daemon:
        raise CollectiveError(
            "cannot start rank processes from a daemonic process; run this in a subprocess"
        )
    deadline = time.monotonic() + job.timeout_s
    context = torch_mp.get_context("spawn")
    reports: Reports = context.Queue()
    started: list[BaseProcess] = []
    grace = 0.0
    try:
        for rank in range(job.world_size):
            process = context.Process(
                target=target or rank_main, args=(rank, job, reports), name=f"allreduce-{rank}"
            )
            process.start()
            started.append(process)
        timings = _await_timings(started, reports, job, deadline)
        grace = min(GRACE_S, max(deadline - time.monotonic(), 0.0))
        return timings
    finally:
        _stop(started, grace)
        reports.close()
        reports.join_thread()


def _await_timings(
    ranks: list[BaseProcess], reports: Reports, job: Job, deadline: float
) -> Timings:
    while True:
        # Exit codes first: a rank flushes its report before it exits, so a report that is
        # missing after an exit seen here will not come.
        exitcodes = [process.exitcode for process in ranks]
        try:
            report = reports.get(timeout=POLL_S)
        except queue.Empty:
            _raise_if_stuck(exitcodes, job, deadline)
            continue
        if report.error is not None:
            raise CollectiveError(f"rank {report.rank} failed: {report.error}")
        if report.timings is not None:
            return report.timings


def _raise_if_stuck(exitcodes: list[int | None], job: Job, deadline: float) -> None:
    for rank, code in enumerate(exitcodes):
        if code is not None and code != 0:
            raise CollectiveError(f"rank {rank} {_describe_exit(code)} without a report")
    if all(code == 0 for code in exitcodes):
        raise CollectiveError("every rank exited, and rank 0 sent no timings")
    if time.monotonic() > deadline:
        raise CollectiveError(
            f"all-reduce did not finish within {job.timeout_s:g} s "
            f"({job.world_size} ranks, {job.backend}, sizes {list(job.sizes)})"
        )


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def _stop(ranks: list[BaseProcess], grace_s: float) -> None:
    """Let ranks exit within ``grace_s``, then terminate, then kill; release their handles."""
    until = time.monotonic() + grace_s
    for process in ranks:
        process.join(max(until - time.monotonic(), 0.0))
    for process in ranks:
        if process.is_alive():
            process.terminate()
            process.join(GRACE_S)
        if process.is_alive():
            process.kill()
            process.join()
        process.close()


def rank_main(rank: int, job: Job, reports: Reports) -> None:
    """Spawned target: time every size; rank 0 reports its timings, a failing rank its error."""
    try:
        timings = _time_rank(rank, job)
    except Exception as exc:  # the parent turns the report into a CollectiveError
        reports.put(Report(rank, error=f"{type(exc).__name__}: {exc}"[:2000]))
        return
    if rank == 0:
        reports.put(Report(rank, timings=timings))


def _time_rank(rank: int, job: Job) -> Timings:
    device = torch.device("cuda", rank) if job.device_type == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(
        job.backend,
        init_method=f"tcp://127.0.0.1:{job.port}",
        rank=rank,
        world_size=job.world_size,
        timeout=timedelta(seconds=job.timeout_s),
        device_id=device if device.type == "cuda" else None,
    )
    try:
        return {size: _time_size(size, device, job) for size in job.sizes}
    finally:
        dist.destroy_process_group()


def _time_size(size: int, device: torch.device, job: Job) -> list[float]:
    # Zeros stay zeros under SUM: repeated calls never overflow to inf or reach denormals.
    tensor = torch.zeros(size // FLOAT32_BYTES, dtype=torch.float32, device=device)
    for _ in range(job.warmup):
        dist.all_reduce(tensor)
    _sync(device)
    seconds = []
    for _ in range(job.repeats):
        dist.barrier()
        _sync(device)
        began = time.perf_counter()
        dist.all_reduce(tensor)  # gloo on CPU returns when done; NCCL needs the sync below
        _sync(device)
        seconds.append(time.perf_counter() - began)
    return seconds


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
