"""Typed builders of native run payloads."""

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

from app.runs.schemas import EXAMPLE_RUN

START = datetime(2026, 1, 1, tzinfo=UTC)


def example_run(**changes: Any) -> dict[str, Any]:
    """The docs/design.md §3 example payload, with top-level fields replaced."""
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


def nightly(
    index: int,
    rows: list[dict[str, Any]],
    *,
    torch: str = "2.6.0.dev20260101",
    triton: str = "3.1.0",
    machine: str = "h100-8",
) -> dict[str, Any]:
    """The ``index``-th nightly run of a machine with a given torch and triton."""
    payload = run_payload(f"{machine}-nightly-{index}", rows, machine=machine, index=index)
    payload["environment"] = {"channel": "nightly", "torch": torch, "packages": {"triton": triton}}
    return payload


def case_rows(model: str, config: str, latency: float, **metrics: float) -> list[dict[str, Any]]:
    """A latency row (with samples) and any other metrics of one torchbench case."""
    common = {
        "suite": "torchbench",
        "model": model,
        "mode": "inference",
        "precision": "bf16",
        "config": config,
    }
    rows = [
        {
            **common,
            "metric": "latency",
            "value": latency,
            "samples": [latency * 0.995, latency, latency * 1.005],
        }
    ]
    rows += [{**common, "metric": name, "value": value} for name, value in metrics.items()]
    return rows
