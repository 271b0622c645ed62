"""The child process that measures one shard; ``workers.shard_runner`` starts and watches it.

``python -m workers.shard_child SPEC OUT PARENT``: SPEC a JSON file ``{"tier": ...,
"cases": [...]}`` (the shard's result identities, as ``workers.tiers.plan_shards`` made them)
and PARENT the worker's pid; the child writes its result rows to OUT as JSON and exits 0. The
shard runs in a process of its own so that a crash, a hang or an out-of-memory takes down the
shard, not the worker. If the worker dies, even while the child is still importing torch, the
child notices that its parent is no longer PARENT and exits too, so an orphan never holds the
device.

Before it imports torch the child pins itself to the cores ``BENCHWATCH_PIN_CORES`` names
(``workers.pinning``), so that torch's threads, and the compile workers it starts, inherit
them; ``workers.measurements.run_measurements`` records it, and each row's noise, in the rows.
"""

import json
import os
import sys
import threading
import time
from pathlib import Path

from app.core.config import settings
from workers.pinning import apply_pinning, plan_pinning


def _exit_with_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(3)


def main() -> int:
    """Entry point of the shard child: pin, read the spec, measure, write the rows."""
    threading.Thread(target=_exit_with_parent, args=(int(sys.argv[3]),), daemon=True).start()
    # Pinning sets this thread's affinity; torch, imported after it, starts its threads from
    # here, so they inherit it (the watcher above only sleeps).
    pinning = apply_pinning(plan_pinning(settings.PIN_CORES))
    import torch

    from workers.measurements import run_measurements
    from workers.tiers import TIERS, measurements_of

    spec = json.loads(Path(sys.argv[1]).read_text())
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    tier = spec["tier"]
    rows = run_measurements(measurements_of(tier, spec["cases"]), device, TIERS[tier].plan, pinning)
    Path(sys.argv[2]).write_text(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
