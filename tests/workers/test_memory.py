"""Peak memory on the CPU, from the allocator's own events."""

import torch

from workers.memory import _running_peak, peak_memory_gb

CPU = torch.device("cpu")


def test_running_peak_counts_the_rise_over_the_earlier_low() -> None:
    assert _running_peak([(1, 100), (2, 50), (3, -150)]) == 150
    # Freed first (last step's gradients), then built again: the rebuild is the peak.
    assert _running_peak([(1, -400), (2, 300), (3, 100), (4, -50)]) == 400
    assert _running_peak([(2, -10), (1, 30)]) == 30  # taken in time order


def test_a_call_that_holds_more_memory_has_a_higher_peak() -> None:
    small = peak_memory_gb(lambda: torch.ones(1_000).sum(), CPU)
    large = peak_memory_gb(lambda: (torch.ones(1_000_000) * 2).sum(), CPU)
    assert 0 < small < large
    assert large >= 2 * 4e6 / 1e9  # the ones and their product live at the same time


def test_inductor_temporaries_inside_the_compiled_region_are_counted() -> None:
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1)
    )
    x = torch.randn(32, 64)
    compiled = torch.compile(model)
    with torch.no_grad():
        compiled(x)
        peak = peak_memory_gb(lambda: compiled(x), CPU)
    assert peak >= 32 * 4096 * 4 / 1e9  # the hidden activation, allocated by generated code
