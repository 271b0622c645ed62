"""Writes measurements.pkl and measurements.json with torch.utils.benchmark (CPU).

From the repository root: ``.venv/bin/python tests/data/uploads/torch_utils_benchmark/generate.py``
(torch 2.13, CPU, is in the virtualenv; tests read the saved files, not torch).
``measurements.pkl`` is a list of ``Measurement`` objects saved with ``pickle``, as people
keep them; ``measurements.json`` holds the same measurements as ``dataclasses.asdict`` writes
them.
"""

import dataclasses
import json
import pickle
from pathlib import Path

import torch
from torch.utils.benchmark import Measurement, Timer

HERE = Path(__file__).parent


def measure() -> list[Measurement]:
    """Two statements x two sizes x one and two threads (blocked_autorange); a sum (timeit)."""
    results = []
    for size in (64, 1024):
        for threads in (1, 2):
            setup = f"x = torch.ones({size}); y = torch.ones({size})"
            for stmt, description in (("x + y", "add"), ("torch.mul(x, y)", "mul")):
                timer = Timer(
                    stmt,
                    setup=setup,
                    label="pointwise",
                    sub_label=f"ones({size})",
                    description=description,
                    num_threads=threads,
                    globals={"torch": torch},
                )
                results.append(timer.blocked_autorange(min_run_time=0.05))
    sum_timer = Timer(
        "x.sum()",
        setup="x = torch.ones(4096)",
        label="reduction",
        description="sum",
        env="cpu-fixture",
        globals={"torch": torch},
    )
    results.append(sum_timer.timeit(500))
    return results


if __name__ == "__main__":
    measurements = measure()
    (HERE / "measurements.pkl").write_bytes(pickle.dumps(measurements))
    as_json = [dataclasses.asdict(m) for m in measurements]
    (HERE / "measurements.json").write_text(json.dumps(as_json, indent=1) + "\n")
