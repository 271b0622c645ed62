"""Typed builders of native run payloads."""

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

from app.runs.schemas import EXAMPLE_RUN

START = datetime(2026, 1, 1, tzinfo=UTC)


def example_run(**changes: Any) -> dict[str, Any]:
    """The DESIGN.md §3 example payload, with top-level fields replaced."""
    payload = copy.deepcopy(EXAMPLE_RUN)
    payload.update(changes)
    return payload


def result(
    model: str = "resnet50", metric: str = "latency", value: float | None = 4.2, **fields: Any
) -> dict[str, Any]:
    """One native result row (torchbench, inference, bf16, cudagraphs by default)."""
    row: dict[str, Any] = {
        "suite": "torchbench",
        "model": model,
        "mode": "inference",
        "precision": "bf16",
        "config": "cudagraphs",
        "metric": metric,
    }
    if value is not None:
        row["value"] = value
    row.update(fields)
    return row


def run_payload(
    key: str,
    results: list[dict[str, Any]],
    *,
    machine: str = "h100-8",
    device: str = "cuda",
    channel: str = "nightly",
    index: int = 0,
    **fields: Any,
) -> dict[str, Any]:
    """A run on ``machine``; ``index`` spaces runs 12 hours apart from START."""
    payload: dict[str, Any] = {
        "key": key,
        "machine": {"name": machine, "device": device, "arch": "NVIDIA H100 80GB HBM3"},
        "environment": {"channel": channel, "torch": "2.6.0"},
        "started_at": (START + timedelta(hours=12 * index)).isoformat(),
        "results": results,
    }
    payload.update(fields)
    return payload


def many_results(count: int, *, scale: float = 1.0) -> list[dict[str, Any]]:
    """``count`` distinct latency results over synthetic models."""
    return [
        result(
            model=f"model_{i // 4}",
            config=["eager", "default", "cudagraphs", "dynamic"][i % 4],
            value=(1.0 + i % 17) * scale,
            samples=[(1.0 + i % 17) * scale] * 3,
        )
        for i in range(count)
    ]
