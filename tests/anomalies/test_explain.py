"""Environment diffs and hints, on plain values."""

from app.anomalies.explain import (
    Reading,
    Scope,
    config_hint,
    diff_environments,
    metric_hints,
    root_cause_hints,
)


def test_environment_diff_names_what_changed() -> None:
    good = {
        "torch": "2.6.0",
        "driver": "550",
        "packages": {"triton": "3.1", "numpy": "2.1"},
        "compiler_options": {"max_autotune": False},
    }
    bad = {
        "torch": "2.7.0",
        "driver": "550",
        "packages": {"triton": "3.2", "sympy": "1.13"},
        "compiler_options": {"max_autotune": False},
    }
    assert diff_environments(good, bad) == {
        "torch": ["2.6.0", "2.7.0"],
        "packages": {"numpy": ["2.1", None], "sympy": [None, "1.13"], "triton": ["3.1", "3.2"]},
    }
    assert diff_environments(good, good) == {}


def test_metric_hints() -> None:
    readings = {
        "compilation_latency": Reading(30.0, 45.0),
        "dynamo_peak_mem": Reading(8.0, 8.1),
        "graph_breaks": Reading(2.0, 5.0),
        "kernel_count": Reading(100.0, 140.0),
        "host_time": Reading(1.0, 1.5),
        "device_time": Reading(2.0, 2.0),
    }
    assert metric_hints("latency", readings) == [
        "compile time rose (+50%)",
        "kernel count rose (+40%)",
        "graph breaks rose (2 -> 5)",
        "host-side overhead rose while device time did not",
    ]
    assert metric_hints("latency", {"allreduce_latency": Reading(10.0, 10.2)}) == []


def test_config_hint_only_when_the_others_stayed_flat() -> None:
    flat = {"eager": Reading(10.0, 10.1), "default": Reading(5.0, 5.0)}
    assert config_hint("dynamic", 0.1, flat) == (
        "only the dynamic-shapes config moved (default, eager stayed flat)"
    )
    moved = {**flat, "cudagraphs": Reading(4.0, 4.6)}
    assert config_hint("dynamic", 0.1, moved) is None
    assert config_hint("default", 0.1, {}) is None


COMPILED = Scope("cudagraphs", {"backend": "inductor", "cudagraphs": True}, gpu_count=1)
DYNAMIC = Scope("dynamic", {"backend": "inductor", "dynamic": True}, gpu_count=1)
EAGER = Scope("eager", {"backend": "eager"}, gpu_count=1)


def test_code_size_hint_names_kernel_count_and_launch_latency() -> None:
    case = {
        "kernel_count": Reading(412.0, 569.0),
        "kernel_launch_latency": Reading(4.1, 5.0),
        "host_time": Reading(2.0, 2.1),  # +5%: within the margin, not cited
    }
    assert root_cause_hints("regression", COMPILED, case, {}) == [
        "likely instruction-cache pressure / code size:"
        " kernel_count +38% (412 -> 569), kernel_launch_latency +22% (4.1 -> 5)"
    ]
    # host time stands in for a launch latency the profiler did not measure
    host = {"kernel_count": Reading(100.0, 130.0), "host_time": Reading(1.0, 1.2)}
    assert root_cause_hints("regression", COMPILED, host, {}) == [
        "likely instruction-cache pressure / code size:"
        " kernel_count +30% (100 -> 130), host_time +20% (1 -> 1.2)"
    ]
    assert root_cause_hints("regression", EAGER, case, {}) == []  # eager compiles nothing
    assert root_cause_hints("improvement", COMPILED, case, {}) == []  # a step that helps
    fewer = {**case, "kernel_count": Reading(412.0, 300.0)}
    assert root_cause_hints("regression", COMPILED, fewer, {}) == []
    small = {**case, "kernel_count": Reading(412.0, 440.0)}  # +7%: below the margin
    assert root_cause_hints("regression", COMPILED, small, {}) == []
    no_launch = {"kernel_count": Reading(412.0, 569.0), "kernel_launch_latency": Reading(4.1, 4.2)}
    assert root_cause_hints("regression", COMPILED, no_launch, {}) == []


def test_fragmentation_hint_needs_recompiles_and_peak_memory_on_dynamic_shapes() -> None:
    case = {"recompiles": Reading(0.0, 3.0), "dynamo_peak_mem": Reading(8.0, 10.0)}
    assert root_cause_hints("regression", DYNAMIC, case, {}) == [
        "likely memory fragmentation from recompiles:"
        " recompiles 0 -> 3, dynamo_peak_mem +25% (8 -> 10)"
    ]
    user_config = Scope("my_dynamic", {"backend": "inductor", "dynamic": True}, gpu_count=None)
    assert root_cause_hints("regression", user_config, case, {}) == [
        root_cause_hints("regression", DYNAMIC, case, {})[0]
    ]
    assert root_cause_hints("regression", COMPILED, case, {}) == []  # static shapes
    steady = {**case, "recompiles": Reading(3.0, 3.0)}
    assert root_cause_hints("regression", DYNAMIC, steady, {}) == []
    flat_memory = {**case, "dynamo_peak_mem": Reading(8.0, 8.4)}
    assert root_cause_hints("regression", DYNAMIC, flat_memory, {}) == []
    peak = {"recompiles": Reading(2.0, 6.0), "peak_memory": Reading(20.0, 26.0)}
    assert root_cause_hints("regression", DYNAMIC, peak, {}) == [
        "likely memory fragmentation from recompiles:"
        " recompiles 2 -> 6, peak_memory +30% (20 -> 26)"
    ]


def bandwidth(before: float, after: float) -> dict[str, Reading]:
    return {"allreduce_bus_bandwidth": Reading(before, after)}


def test_congestion_hint_needs_most_collectives_slower_on_a_multi_gpu_machine() -> None:
    eight = Scope("cudagraphs", {"backend": "inductor"}, gpu_count=8)
    collectives = {
        "all_reduce 1 MiB": bandwidth(100.0, 95.0),
        "all_reduce 16 MiB": bandwidth(180.0, 120.0),
        "all_reduce 256 MiB": bandwidth(190.0, 110.0),
    }
    assert root_cause_hints("regression", eight, {}, collectives) == [
        "likely network congestion: all-reduce slower on 2 of 3 collectives:"
        " allreduce_bus_bandwidth -42% (190 -> 110) [all_reduce 256 MiB],"
        " allreduce_bus_bandwidth -33% (180 -> 120) [all_reduce 16 MiB]"
    ]
    one_gpu = Scope("cudagraphs", {"backend": "inductor"}, gpu_count=1)
    assert root_cause_hints("regression", one_gpu, {}, collectives) == []
    collective = Scope("eager", {"backend": "eager"}, gpu_count=1, collective=True)
    assert root_cause_hints("regression", collective, {}, collectives) != []
    one_slow = {**collectives, "all_reduce 16 MiB": bandwidth(180.0, 178.0)}
    assert root_cause_hints("regression", eight, {}, one_slow) == []  # one of three: noise
    latency_only = {"all_reduce": {"allreduce_latency": Reading(50.0, 80.0)}}
    assert root_cause_hints("regression", eight, {}, latency_only) == [
        "likely network congestion: all-reduce slower on 1 of 1 collectives:"
        " allreduce_latency +60% (50 -> 80) [all_reduce]"
    ]
    assert root_cause_hints("regression", eight, {}, {}) == []


def test_a_reading_from_zero_has_no_relative_change_yet_rose() -> None:
    """comparison.relative_change's rule, and a kernel count from 0 still rose."""
    assert Reading(0.0, 3.0).rel is None
    assert Reading(0.0, 3.0).rose()
    assert Reading(None, 3.0).rel is None
    assert Reading(2.0, 3.0).rel == 0.5
