"""The child process that measures one shard; ``workers.shard_runner`` starts and watches it.

``python -m workers.shard_child SPEC OUT PARENT``: SPEC a JSON file ``{"tier": ...,
"cases": [...]}`` (the shard's result identities, as ``workers.tiers.plan_shards`` made them)
and PARENT the worker's pid; the child writes its result rows to OUT as JSON and exits 0. The
shard runs in a process of its own so that a crash, a hang or an out-of-memory takes down the
shard, not the worker. If the worker dies, even while the child is still importing torch, the
child notices that its parent is no longer PARENT and exits too, so an orphan never holds the
device.
"""

import json
import os
import sys
import threading
import time
from pathlib import Path

import torch

from workers.run_suite import run_measurements
from workers.tiers import TIERS, measurements_of


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
    rows = run_measurements(measurements_of(tier, spec["cases"]), device, TIERS[tier].plan)
    Path(sys.argv[2]).write_text(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
