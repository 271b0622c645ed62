"""The proof of issue 28 point 5's third strategy: a real Inductor setting that differs between
the good and the bad run, among harmless ones, is named as the slowdown's cause.

The runs' settings are recorded as a compiled run records them (``recorded_settings`` under
torch's own config patches): the bad run compiled with ``inductor.cpp.simdlen = 1`` (no SIMD
in Inductor's C++ kernels), ``inductor.fallback_random`` and ``dynamo.suppress_errors``, the
good one with none. No component differs. The worker's ``Search`` is driven directly, not
through a Celery worker (each probe is a fresh Python that imports torch and compiles, about
8 s here: a worker end to end would add its start and the uploads' detection to that), with
the real oracle: the ``pip`` provider prepares the environment once, every probe runs the
command suite's script in it, and the settings reach torch through the settings hook
(``BENCHWATCH_COMPILER_SETTINGS`` and ``sitecustomize``), the script knowing nothing of them.

The script times a compiled chain of pointwise ops on 2^18 floats against its eager self side
by side (so a busy neighbour moves both): here the compiled chain takes about the eager time
vectorized and 3 to 7 times it with ``simdlen = 1``. ddmin over the three differing settings
names ``inductor.cpp.simdlen`` in three probes (two halves, then one of the first half's).
"""

import json
from pathlib import Path
from typing import Any

import pytest
import torch
import torch._dynamo.config
import torch._inductor.config

from app.core.command_suites import CommandSuite
from app.localization.lifecycle import Costs, ProbeRow
from workers.compiler_settings import recorded_settings
from workers.localize import SETTINGS, Measuring, Oracle, Search
from workers.providers import Environments

SCRIPT = r"""
import json, os, statistics, time
import torch

torch.set_num_threads(1)

def chain(x):
    return torch.tanh(x.exp() * 0.5 + x.sin()) * x.cos()

x = torch.randn(1 << 18)
compiled = torch.compile(chain)

def least(function):
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        function(x)
        best = min(best, time.perf_counter() - start)
    return best

for _ in range(3):
    compiled(x), chain(x)
# The compiled chain's time in units of the eager chain's, timed side by side.
data = [least(compiled) / least(chain) for _ in range(20)]
stats = {"median": statistics.median(data) / 1000, "min": min(data) / 1000,
         "max": max(data) / 1000, "data": [v / 1000 for v in data]}
entry = {"name": "test_chain", "fullname": "bench_chain.py::test_chain", "group": None,
         "params": None, "stats": stats}
document = {"benchmarks": [entry], "machine_info": {}, "commit_info": {},
            "datetime": "2026-01-01T00:00:00", "version": "4.0.0"}
with open(os.path.join(os.environ["BENCHWATCH_OUTPUT_DIR"], "bench.json"), "w") as out:
    json.dump(document, out)
"""
CASE = {
    "suite": "chainbench",
    "model": "test_chain",
    "category": "",
    "mode": "inference",
    "precision": "fp32",
    "config": "eager",
    "batch_size": None,
    "params": {},
    "metric": "latency",
    "unit": "ms",
    "higher_is_better": False,
}
CULPRIT = "inductor.cpp.simdlen"


def recorded_runs() -> tuple[dict[str, Any], dict[str, Any]]:
    """The good and bad runs' settings, as a compiled run in this process records them."""
    good = recorded_settings(env={})
    with (
        torch._inductor.config.patch({"cpp.simdlen": 1, "fallback_random": True}),
        torch._dynamo.config.patch(suppress_errors=True),
    ):
        bad = recorded_settings(env={})
    return good, bad


@pytest.mark.slow
def test_the_setting_that_slows_the_case_is_named(tmp_path: Path) -> None:
    good, bad = recorded_runs()
    assert good == {}, good  # nothing else changed in this process
    assert bad == {"dynamo.suppress_errors": True, CULPRIT: 1, "inductor.fallback_random": True}
    script = tmp_path / "bench_chain.py"
    script.write_text(SCRIPT)
    suite = CommandSuite.model_validate(
        {
            "command": ["python", str(script)],
            "format": "pytest-benchmark",
            "hints": {"suite": CASE["suite"], "device": "cpu"},
            "timeout_s": 300,
            # Inductor's pool of compile processes is seconds of each probe's start on 2 cores.
            "env": {"TORCHINDUCTOR_COMPILE_THREADS": "1"},
        }
    )
    environments = Environments(root=tmp_path / "envs", budget_bytes=2**30)
    measuring = Measuring(environments, "pip", suite, "cpu-box", "cpu", 300, 2**24, 30)
    rows: list[ProbeRow] = []

    def report(row: ProbeRow, costs: Costs) -> None:
        rows.append(row)

    recorded = {"torch": torch.__version__}
    search = Search(
        Oracle(measuring, CASE),
        recorded | {SETTINGS: good},
        recorded | {SETTINGS: bad},
        {},
        report,
    )
    found = search.run()

    probes = [(row.label, row.outcome, round(sorted(row.samples)[10], 2)) for row in rows]
    # Every probe in the output before any assertion: a failure's captured stdout shows
    # them all, where its message cuts them at a few hundred characters.
    print(f"\nsettings bisection: {probes}; costs {found.costs}")  # noqa: T201
    assert found.state == "culprit_found", (found.reason, probes)
    assert found.answer["culprit"] == {
        "kind": "setting",
        "names": [CULPRIT],
        "values": {CULPRIT: [None, 1]},
    }, probes
    assert found.answer["strategy"] == "setting_bisection"
    assert f"{CULPRIT} None -> 1" in found.reason
    assert {row.strategy for row in rows} == {"settings"}
    judged = {row.label: row.outcome for row in rows if row.outcome != "reference"}
    assert judged[f"good with {CULPRIT} from bad"] == "bad", probes
    assert judged["good with dynamo.suppress_errors from bad"] == "good", probes
    # One environment prepared: the settings change how a probe runs, not what it runs in.
    assert found.costs.builds == 1
    assert found.costs.probe_count == len(judged) <= 4
    (stored,) = [row.spec for row in rows if row.label == f"good with {CULPRIT} from bad"]
    assert json.loads(json.dumps(stored)) == {CULPRIT: 1}  # good has none; its defaults stand
