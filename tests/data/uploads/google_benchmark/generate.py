"""Writes repetitions_aggregates.json with the google-benchmark package's Python bindings.

Run from the repository root: ``.venv/bin/python tests/data/uploads/google_benchmark/generate.py``
(needs ``pip install google-benchmark==1.9.5``; tests read the saved file, not the package).
"""

import sys
from pathlib import Path

import google_benchmark as benchmark

OUT = Path(__file__).with_name("repetitions_aggregates.json")


@benchmark.register
@benchmark.option.arg(8)
@benchmark.option.arg(64)
def sum_list(state: benchmark.State) -> None:
    values = list(range(state.range(0)))
    while state:
        sum(values)
    state.items_processed = state.iterations * state.range(0)
    state.bytes_processed = state.iterations * state.range(0) * 8
    state.counters["elements"] = state.range(0)
    state.counters["adds_per_second"] = benchmark.Counter(
        state.iterations * state.range(0), benchmark.Counter.kIsRate
    )


@benchmark.register
@benchmark.option.unit(benchmark.kMicrosecond)
@benchmark.option.iterations(200)
def sorted_small(state: benchmark.State) -> None:
    values = list(range(100, 0, -1))
    while state:
        sorted(values)
    state.set_label("reversed input")


@benchmark.register
@benchmark.option.range_multiplier(2)
@benchmark.option.range(16, 64)
@benchmark.option.complexity(benchmark.oN)
def join_strings(state: benchmark.State) -> None:
    parts = ["x"] * state.range(0)
    while state:
        "".join(parts)
    state.complexity_n = state.range(0)


@benchmark.register
def broken(state: benchmark.State) -> None:
    while state:
        state.skip_with_error("fixture: this benchmark always fails")
        break


if __name__ == "__main__":
    benchmark.add_custom_context("GIT_COMMIT", "0123abc")
    benchmark.main(
        [
            sys.argv[0],
            "--benchmark_repetitions=3",
            "--benchmark_format=json",
            f"--benchmark_out={OUT}",
            "--benchmark_out_format=json",
            "--benchmark_min_time=0.01s",
        ]
    )
