"""Make a tier's measurements as result rows, as run-suite and a shard's child both do.

One way for both, so that a run's rows say the same whichever way it was made.

Each row with samples gets its within-run noise in ``extra["noise"]`` (the detector's
``within_run_noise``, under which the minimum effect never goes), and each latency row the
pinning it ran under in ``extra["cpu_pinning"]``. This module imports only what measuring
needs: a shard's child imports it, once per shard.
"""

from collections.abc import Callable
from typing import Any

import torch

from app.anomalies.detectors import within_run_noise
from workers.harness import Plan, measure
from workers.pinning import Pinning
from workers.tiers import Measurement

Progress = Callable[[int, int, str], None]


def run_measurements(
    measurements: list[Measurement],
    device: torch.device,
    plan: Plan,
    pinning: Pinning,
    progress: Progress | None = None,
) -> list[dict[str, Any]]:
    """Make the measurements in order, as result rows with their noise and ``pinning``."""
    rows: list[dict[str, Any]] = []
    for done, (case, config, precision, mode) in enumerate(measurements, start=1):
        if progress is not None:
            progress(done, len(measurements), f"{case.model} {config} {precision} {mode}")
        rows += measure(case, config, precision, device, plan, mode)
    return annotated(rows, pinning)


def annotated(rows: list[dict[str, Any]], pinning: Pinning) -> list[dict[str, Any]]:
    """The rows, each with samples given its noise, each latency row the pinning."""
    pinned = pinning.record()
    for row in rows:
        extra = dict(row.get("extra") or {})
        noise = within_run_noise(row.get("samples") or ())
        if noise is not None:
            extra["noise"] = round(noise, 6)
        if row.get("metric") == "latency":
            extra["cpu_pinning"] = pinned
        if extra:
            row["extra"] = extra
    return rows
