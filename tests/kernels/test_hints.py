"""Hints from a step's kernel diff: where the step is, fusion changes, a launch-bound step."""

from typing import Any

import numpy as np
from fastapi.testclient import TestClient

from app.anomalies.explain import Reading, Scope, kernel_hints, root_cause_hints
from app.kernels.diff import diff
from app.notifications.message import finding_line
from tests.anomalies.test_service import BAD, RUNS, dynamic_bert_slower, history_rows, regressions
from tests.factories import nightly
from tests.kernels.test_diff import side
from tests.posting import drain


def test_a_split_kernel_is_named_with_its_share() -> None:
    base = side(100.0, triton_poi_fused_add_mul_relu_0=40.0, triton_red_fused_sum_1=40.0)
    head = side(150.0, triton_poi_fused_add_mul_0=45.0, triton_poi_fused_relu_1=35.0)
    head.kernels.append(base.kernels[1])  # the sum, unchanged
    hints = kernel_hints(diff(base, head))
    assert hints == [
        "kernels: 90% of the step is in `fused_add_mul` (new)",
        "fusion changed: fused_add_mul_relu split into fused_add_mul + fused_relu, 80% of the step",
    ]


def test_a_step_outside_kernels_that_held_is_launch_bound() -> None:
    base = side(100.0, triton_poi_fused_add_0=30.0, triton_red_fused_sum_1=30.0)
    head = side(140.0, triton_poi_fused_add_2=30.5, triton_red_fused_sum_3=30.0)
    headline, hint = kernel_hints(diff(base, head))
    assert headline == "kernels: 99% of the step is outside the kernels"
    assert hint.startswith("likely launch-bound: 99% of the step is outside the kernels")
    slower = side(140.0, triton_poi_fused_add_2=45.0, triton_red_fused_sum_3=30.0)
    assert not any("launch-bound" in h for h in kernel_hints(diff(base, slower)))


def test_a_notice_line_ends_on_where_the_step_is() -> None:
    finding: dict[str, Any] = {
        "kind": "regression",
        "suite": "torchbench",
        "model": "bert",
        "metric": "latency",
        "rel_change": 0.1,
        "hints": ["kernel count rose (+12%)", "kernels: 78% of the step is in `fused_x` (+130%)"],
    }
    assert finding_line(finding) == (
        "regression +10.0% latency torchbench/bert; 78% of the step is in `fused_x` (+130%)"
    )
    assert finding_line({**finding, "hints": []}) == "regression +10.0% latency torchbench/bert"


def softmax_profile(index: int) -> dict[str, Any]:
    """bert under dynamic, its softmax 130% slower from the bad nightly on: 78% of the step."""
    slow = index >= BAD
    return {
        "suite": "torchbench",
        "model": "bert",
        "mode": "inference",
        "precision": "bf16",
        "config": "dynamic",
        "timing": "device",
        "calls": 5,
        "wall_us": 11_000.0 if slow else 10_000.0,
        "kernels": [
            {
                "name": f"triton_red_fused__softmax_{2 if slow else 0}",
                "calls": 1,
                "time_us": 1380.0 if slow else 600.0,
            },
            {"name": "sm90_xmma_gemm_bf16bf16", "calls": 2, "time_us": 5000.0},
        ],
    }


def post_profiled_history(client: TestClient, headers: dict[str, str]) -> None:
    """40 nightlies whose bert/dynamic case steps at BAD, each with its kernel profile."""
    noise = np.random.default_rng(0)
    for index in range(RUNS):
        payload = nightly(index, history_rows(index, noise, dynamic_bert_slower))
        payload["kernel_profiles"] = [softmax_profile(index)]
        answer = client.post("/api/v1/runs", json=payload, headers=headers)
        assert answer.status_code == 201, answer.text
    drain(client)


def test_a_steps_hints_and_page_say_where_it_is_among_the_kernels(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    post_profiled_history(client, ingest_headers)
    (step,) = regressions(client)
    assert "kernels: 78% of the step is in `fused_softmax` (+130%)" in step["hints"]
    kernels = client.get(f"/api/v1/regressions/{step['id']}/kernels").json()["diff"]
    assert kernels["kernels"][0]["share"] == 0.78
    page = client.get(f"/regressions/{step['id']}/kernels")
    assert page.status_code == 200
    assert "78% of the step is in `fused_softmax` (+130%)" in page.text
    assert client.get("/regressions/999/kernels").status_code == 404


def test_the_code_size_hint_reads_the_kernel_diff_where_the_runs_count_no_kernels() -> None:
    base = side(100.0, triton_poi_fused_add_0=30.0)
    head = side(
        130.0, triton_poi_fused_add_3=30.0, triton_poi_fused_mul_4=10.0, triton_poi_fused_sub_5=10.0
    )
    scope = Scope("default", {}, 1)
    launches = {"host_time": Reading(1.0, 1.3)}
    (hint,) = root_cause_hints("regression", scope, launches, {}, diff(base, head))
    assert hint == (
        "likely instruction-cache pressure / code size: kernel_count +200% (1 -> 3), "
        "host_time +30% (1 -> 1.3); new kernels: fused_mul, fused_sub"
    )
    assert root_cause_hints("regression", scope, launches, {}) == []  # no kernel count


def test_the_congestion_hint_cites_the_collective_kernels_that_carry_the_step() -> None:
    allreduce = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
    base = side(100.0, **{allreduce: 50.0, "triton_poi_fused_add_0": 20.0})
    head = side(140.0, **{allreduce: 80.0, "triton_poi_fused_add_1": 20.0})
    eight_gpus = Scope("eager", {}, 8)
    (hint,) = root_cause_hints("regression", eight_gpus, {}, {}, diff(base, head))
    assert hint == (
        "likely network congestion: collective kernels carry 75% of the step: "
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL +60%"
    )
    one_gpu = Scope("eager", {}, 1)
    assert root_cause_hints("regression", one_gpu, {}, {}, diff(base, head)) == []
