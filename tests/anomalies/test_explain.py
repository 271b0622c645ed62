"""Environment diffs and hints, on plain values."""

from app.anomalies.explain import Reading, config_hint, diff_environments, metric_hints


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
