"""A suite run cut into shards, and the child process that runs one shard.

A shard is one case in one mode under all of its tier's configs and precisions: the unit that
a crash, a hang or an out-of-memory takes down, and that is retried. The worker runs it as
``python -m workers.shards SPEC OUT PARENT``, SPEC a JSON file ``{"tier": ..., "cases": [...]}``
and PARENT the worker's pid; the child writes its result rows to OUT as JSON and exits 0. If the
worker dies, even while the child is still importing torch, the child notices that its parent is
no longer PARENT and exits too, so an orphan never holds the device.
"""

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import torch

from app.suites.service import ShardPlan
from workers.harness import identity
from workers.run_suite import TIERS, Task, run_tasks, tier_tasks


def plan_shards(tier: str, models: list[str] | None = None) -> list[ShardPlan]:
    """The shards of a tier (or of only these models), each with its result identities."""
    shards: dict[str, list[dict[str, Any]]] = {}
    for task in tier_tasks(TIERS[tier]):
        if models is None or task.case.model in models:
            shards.setdefault(f"{task.case.model} {task.mode}", []).append(identity(*task))
    return [ShardPlan(label, cases) for label, cases in shards.items()]


def tasks_of(tier: str, cases: list[dict[str, Any]]) -> list[Task]:
    """The tasks of a tier that these result identities name."""
    known = {(c.suite, c.model): c for group in TIERS[tier].groups for c in group.cases}
    return [
        Task(known[c["suite"], c["model"]], c["config"], c["precision"], c["mode"]) for c in cases
    ]


def _exit_with_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(3)


def main() -> int:
    """Entry point of the shard child: read the spec, measure, write the rows."""
    threading.Thread(target=_exit_with_parent, args=(int(sys.argv[3]),), daemon=True).start()
    spec = json.loads(Path(sys.argv[1]).read_text())
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    tier = spec["tier"]
    rows = run_tasks(tasks_of(tier, spec["cases"]), device, TIERS[tier].plan)
    Path(sys.argv[2]).write_text(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
