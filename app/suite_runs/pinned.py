"""Cases measured again on the stack a run had: what confirmation and compare re-runs share.

A re-run's samples mean something only beside the run they are read with when the machine's
stack is still that run's (``COMPARED``): the worker checks before it measures
(``environment_changes``). The cases go in shards as the tiers cut them (``plans``), and a
measured row's samples come back in the series' stored unit (``measured_samples``).
"""

from collections.abc import Iterable, Mapping
from typing import Any

from app.benchmarks import vocabulary as vocab
from app.runs.models import Run
from app.suite_runs.service import ShardPlan

# The stack a re-run must share with the run it measures again for its samples to compare.
COMPARED = ("torch", "torch_git_sha", "triton", "cuda", "hip", "driver", "python")


def stack_of(run: Run) -> dict[str, Any]:
    """The parts of a run's stack a re-run must share (``COMPARED``)."""
    return {name: getattr(run.environment, name) for name in COMPARED}


def environment_changes(
    expected: Mapping[str, Any], here: Mapping[str, Any]
) -> dict[str, list[str]]:
    """The parts of the stack (``COMPARED``) that differ: ``{field: [expected, here]}``."""
    return {
        name: [str(expected.get(name) or ""), str(here.get(name) or "")]
        for name in COMPARED
        if str(expected.get(name) or "") != str(here.get(name) or "")
    }


def plans(cases: Iterable[dict[str, Any]]) -> list[ShardPlan]:
    """The cases in shards as ``workers.tiers.plan_shards`` cuts them: a model in one mode."""
    shards: dict[str, list[dict[str, Any]]] = {}
    for case in cases:
        shards.setdefault(f"{case['model']} {case['mode']}", []).append(case)
    return [ShardPlan(label, found) for label, found in shards.items()]


def measured_samples(row: Mapping[str, Any], unit: str) -> list[float]:
    """A measured row's samples (or its value) in the series' stored unit; [] if it failed."""
    if row.get("status", "ok") != "ok":
        return []
    found = row.get("samples") or ([row["value"]] if row.get("value") is not None else [])
    given = row.get("unit")
    factor = 1.0
    if given and unit and given in vocab.UNITS and unit in vocab.UNITS:
        factor = vocab.unit_factor(given, unit) or 1.0
    return [float(x) * factor for x in found]
