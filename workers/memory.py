"""Peak memory of one call: the figure behind ``peak_memory`` and ``compression_ratio``.

On a GPU it is PyTorch's own definition: ``torch.cuda.max_memory_allocated`` after a reset
(weights included). A CPU has no peak counter, so the allocator's events are read from
torch.profiler (``profile_memory``) and summed in time order: the most host memory torch held
at once during the call above the lowest level before that moment (a training step frees the
last step's gradients before it builds the new ones, so "above the start" would miss them).
Inductor allocates inside one compiled region, so the per-op figures of ``key_averages`` would
miss its temporaries; the raw allocator events do not.
"""

from collections.abc import Callable
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

from workers.profiling import quiet_kineto

GB = 1e9


def peak_memory_gb(call: Callable[[], Any], device: torch.device) -> float:
    """Peak memory (GB) of one ``call()`` on the device."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        call()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) / GB
    profiler = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
    with quiet_kineto():  # kineto's chatter and the allocator's notes stay off stderr
        profiler.start()
        try:
            call()
        finally:
            profiler.stop()
    return _running_peak(_allocations(profiler)) / GB


def _allocations(profiler: profile) -> list[tuple[int, int]]:
    """(time ns, signed bytes) of every allocation and free the allocator reported."""
    results = profiler.profiler.kineto_results if profiler.profiler else None
    if results is None:
        return []
    events = results.events()
    return [(e.start_ns(), e.nbytes()) for e in events if e.name() == "[memory]"]  # type: ignore[attr-defined]


def _running_peak(events: list[tuple[int, int]]) -> int:
    """The largest rise of the running total of signed byte counts over its earlier low."""
    live = low = peak = 0
    for _, nbytes in sorted(events):
        live += nbytes
        low = min(low, live)
        peak = max(peak, live - low)
    return peak
