"""Root-cause hints on detected regressions, from runs posted with their backing metrics."""

from typing import Any

import numpy as np
from fastapi.testclient import TestClient

from app.core.queue import InProcessPublisher
from tests.factories import case_rows, run_payload

RUNS = 32
BAD = 22  # first bad run of every injected step
MODELS = (("bert", 10.0), ("resnet50", 20.0))
CONFIGS = ("eager", "default", "dynamic")
SIZES = (1 << 20, 1 << 24, 1 << 28)  # all-reduce message sizes, bytes


def case_metrics(model: str, config: str, bad: bool) -> dict[str, float]:
    """bert under ``default`` grows more kernels that launch slower; resnet50 under
    ``dynamic`` recompiles and peaks higher; both 10% slower from BAD on."""
    metrics = {
        "kernel_count": 400.0,
        "kernel_launch_latency": 4.0,
        "recompiles": 0.0,
        "dynamo_peak_mem": 8.0,
    }
    if bad and (model, config) == ("bert", "default"):
        metrics |= {"kernel_count": 560.0, "kernel_launch_latency": 5.0}
    if bad and (model, config) == ("resnet50", "dynamic"):
        metrics |= {"recompiles": 3.0, "dynamo_peak_mem": 10.0}
    return metrics


def all_reduce(size: int, bandwidth: float) -> list[dict[str, Any]]:
    """The built-in suite's all-reduce rows (workers/collective.py) for one message size."""
    common = {
        "suite": "benchwatch-operators",
        "model": "all_reduce",
        "mode": "inference",
        "precision": "fp32",
        "config": "eager",
        "params": {"bytes": size, "world_size": 8, "backend": "nccl"},
    }
    latency = size / (bandwidth * 1e9) * 1e6 * 1.75  # us; busbw = algbw * 2 (n - 1) / n
    return [
        {**common, "metric": "allreduce_bus_bandwidth", "unit": "GB/s", "value": bandwidth},
        {**common, "metric": "allreduce_latency", "unit": "us", "value": latency},
    ]


def post(
    client: TestClient, headers: dict[str, str], *, gpus: int, congested: bool, slow_eager: bool
) -> list[int]:
    """RUNS nightlies of one machine; from BAD on, the steps of ``case_metrics`` (and, if
    ``congested``, all-reduce bandwidth 40% lower; if ``slow_eager``, bert eager 10% slower)."""
    noise = np.random.default_rng(0)
    machine = f"h100-{gpus}"
    ids = []
    for index in range(RUNS):
        bad = index >= BAD
        rows = []
        for model, base in MODELS:
            for config in CONFIGS:
                slower = bad and (model, config) in (
                    ("bert", "default"),
                    ("resnet50", "dynamic"),
                    *((("bert", "eager"),) if slow_eager else ()),
                )
                latency = base * (1.1 if slower else 1.0) * (1 + noise.normal(0, 0.003))
                rows += case_rows(model, config, latency, **case_metrics(model, config, bad))
        for size in SIZES:
            bandwidth = 180.0 * (0.6 if bad and congested else 1.0) * (1 + noise.normal(0, 0.01))
            rows += all_reduce(size, bandwidth)
        payload = run_payload(f"{machine}-{index}", rows, machine=machine, index=index)
        payload["machine"]["gpu_count"] = gpus
        answer = client.post("/api/v1/runs", json=payload, headers=headers)
        assert answer.status_code == 201, answer.text
        ids.append(answer.json()["id"])
    publisher = client.app.state.publisher  # type: ignore[attr-defined]
    assert isinstance(publisher, InProcessPublisher)
    publisher.drain()
    return ids


def latency_hints(client: TestClient) -> dict[tuple[str, str], list[str]]:
    """The hints of each latency regression, by model and config."""
    found = client.get("/api/v1/regressions", params={"metric": "latency", "limit": 50}).json()
    return {
        (r["series"]["benchmark"]["model"], r["series"]["benchmark"]["config"]): r["hints"]
        for r in found["items"]
        if r["direction"] == "regression"
    }


def test_compile_and_dynamic_shape_regressions_get_their_causes(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    post(client, ingest_headers, gpus=1, congested=True, slow_eager=False)
    hints = latency_hints(client)
    assert set(hints) == {("bert", "default"), ("resnet50", "dynamic")}
    code_size = [h for h in hints["bert", "default"] if h.startswith("likely")]
    assert code_size == [
        "likely instruction-cache pressure / code size:"
        " kernel_count +40% (400 -> 560), kernel_launch_latency +25% (4 -> 5)"
    ]
    fragmentation = [h for h in hints["resnet50", "dynamic"] if h.startswith("likely")]
    assert fragmentation == [  # one GPU: the slower all-reduce is no cause here
        "likely memory fragmentation from recompiles:"
        " recompiles 0 -> 3, dynamo_peak_mem +25% (8 -> 10)"
    ]


def test_a_multi_gpu_regression_with_slower_all_reduce_gets_congestion(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    ids = post(client, ingest_headers, gpus=8, congested=True, slow_eager=True)
    (congestion,) = [h for h in latency_hints(client)["bert", "eager"] if h.startswith("likely")]
    assert congestion.startswith(
        "likely network congestion: all-reduce slower on 3 of 3 collectives:"
        " allreduce_bus_bandwidth -4"
    )
    assert "[all_reduce backend=nccl bytes=" in congestion
    assert "world_size=8]" in congestion
    # the bandwidth steps are regressions of their own, backed by the same drop (those the
    # detector places at the congested run: it may place a step a run or two early)
    found = client.get("/api/v1/regressions", params={"metric": "allreduce_bus_bandwidth"})
    at_congestion = [r for r in found.json()["items"] if r["first_bad_run_id"] == ids[BAD]]
    assert at_congestion
    for bandwidth_step in at_congestion:
        assert any(h.startswith("likely network congestion") for h in bandwidth_step["hints"])
