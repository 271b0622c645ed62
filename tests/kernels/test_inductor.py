"""Real Inductor kernels on the CPU: identities across renumbering, a split in the diff."""

import copy
import re
from typing import Any

import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient
from torch._inductor import config as inductor_config
from torch._inductor.utils import run_and_get_code

from app.kernels.code import code_diff
from app.kernels.identity import identity_of
from app.suite_runs.rows import CASE_FIELDS, payload_rows
from tests.anomalies.test_service import BAD, RUNS
from tests.factories import run_payload
from tests.posting import drain
from workers.compile_configs import kernels_named
from workers.harness import Case, Plan, measure
from workers.inductor_code import captured_code, kernels_of
from workers.profiling import profile_rows

CPU = torch.device("cpu")
QUICK = Plan(repeats=3, warmup=1)
GENERATED = re.compile(r"^(cpp_fused_\w+) = async_compile", re.MULTILINE)
WEIGHT = torch.randn(64, 64)


def activation(x: torch.Tensor) -> torch.Tensor:
    return torch.relu(x * 2 + 1) * 3


def after_a_matmul(x: torch.Tensor) -> torch.Tensor:
    return activation(x.exp() @ WEIGHT)  # a kernel before: the activation's is numbered 1


def generated_and_profiled(fn: Any, x: torch.Tensor) -> tuple[list[str], list[str]]:
    """The kernels Inductor generated for ``fn``, and those the worker's profile names."""
    torch._dynamo.reset()
    compiled = torch.compile(fn)
    with kernels_named(CPU):
        _, (code, *_) = run_and_get_code(compiled, x)
    rows = profile_rows(compiled, (x,), CPU, precision="fp32")
    (profile,) = payload_rows(rows)["kernel_profiles"]
    return GENERATED.findall(code), [k["name"] for k in profile["kernels"]]


def test_one_fusion_is_one_identity_under_another_number() -> None:
    x = torch.randn(64, 64)
    alone, alone_profiled = generated_and_profiled(activation, x)
    later, later_profiled = generated_and_profiled(after_a_matmul, x)
    assert alone == ["cpp_fused_add_mul_relu_0"]
    assert later[-1] == "cpp_fused_add_mul_relu_1"  # renumbered
    assert identity_of(alone[0]) == identity_of(later[-1])
    # The worker profiles them by name, each graph's id in front of it.
    (first,) = [n for n in alone_profiled if "cpp_fused" in n]
    second = [n for n in later_profiled if "add_mul_relu" in n]
    assert first != second[0]
    assert identity_of(first) == identity_of(second[0]) == identity_of(alone[0])
    assert str(identity_of(first)) == "fused_add_mul_relu"


SLOTS = torch.randint(0, 16, (256, 32), generator=torch.Generator().manual_seed(0))


class Scatter(torch.nn.Module):
    """A scatter-add between two pointwise steps: Inductor falls back to aten for it or not."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        summed = torch.zeros(16, 32, device=x.device).scatter_reduce(0, SLOTS, x * 2 + 1, "sum")
        return torch.relu(summed) * 3


def scatter(device: torch.device, dtype: torch.dtype) -> tuple[Any, tuple[torch.Tensor, ...]]:
    return Scatter().eval(), (torch.randn(256, 32, device=device, dtype=dtype),)


SCATTER = Case("kernels", "scatter", "test", 256, scatter, batch_args=())


def worker_run(key: str) -> dict[str, Any]:
    """The worker's rows of the case, compiled, as a native payload."""
    torch._dynamo.reset()  # dynamo would reuse the other run's compiled frame
    parts = payload_rows(measure(SCATTER, "default", "fp32", CPU, QUICK))
    return {
        "key": key,
        "machine": {"name": "cpu-box", "device": "cpu"},
        "environment": {"channel": "nightly"},
        **parts,
    }


@pytest.fixture(scope="module")
def scatter_runs() -> tuple[dict[str, Any], dict[str, Any]]:
    """The worker's runs of the scatter case under the setting and under the default."""
    with inductor_config.patch({"cpp.fallback_scatter_reduce_sum": False}):
        fused = worker_run("fused")  # the scatter generated inside one kernel
    split = worker_run("split")  # the default: aten's scatter, a kernel before and one after
    return fused, split


def test_a_setting_that_splits_a_kernel_is_named_in_the_kernel_diff(
    client: TestClient,
    ingest_headers: dict[str, str],
    scatter_runs: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    fused, split = copy.deepcopy(scatter_runs)
    latency = next(r for r in fused["results"] if r["metric"] == "latency")
    recorded = latency["extra"]["compiler_settings"]  # (other tests' settings may linger)
    assert recorded["inductor.cpp.fallback_scatter_reduce_sum"] is False
    assert "inductor.cpp.enable_kernel_profile" not in recorded  # kernels_named's patch is not
    ids = []
    for payload in (fused, split):
        answer = client.post("/api/v1/runs", json=payload, headers=ingest_headers)
        assert answer.status_code == 201, answer.text
        ids.append(answer.json()["id"])
    (profile,) = client.get(f"/api/v1/runs/{ids[0]}/kernels").json()["items"]
    assert profile["timing"] == "cpu_self"
    params = {"base_run": ids[0], "head_run": ids[1], "benchmark_id": profile["benchmark"]["id"]}
    found = client.get("/api/v1/kernels/diff", params=params).json()["diff"]
    (change,) = found["fusions"]
    assert change["change"] == "split"
    assert change["before"] == ["fused_add_mul_relu_scatter_reduce_zeros"]
    assert sorted(change["after"]) == ["fused_add_mul_scatter_reduce_zeros", "fused_mul_relu"]
    assert change["share"] == pytest.approx(change["delta_us"] / found["step_us"])
    moved = {k["name"]: k["change"] for k in found["kernels"]}
    assert moved["aten::scatter_reduce_"] == "appeared"
    parts = sum(k["delta_us"] for k in found["kernels"])
    total = parts + found["other_delta_us"] + found["outside_delta_us"]
    assert total == pytest.approx(found["step_us"])
    assert found["graphs"] == [1, 1]
    # The code of both runs was kept: the fused kernel's source went, the two new ones came.
    code = client.get("/api/v1/kernels/code-diff", params=params).json()["kernels"]
    changes = {c["identity"]: (c["change"], c["source"]) for c in code}
    gone, source = changes["fused_add_mul_relu_scatter_reduce_zeros"]
    assert gone == "disappeared"
    assert 'extern "C"' in source
    assert '"KERNEL"' in source  # its record function's name: graph id and number gone
    assert "cpp_fused" not in source
    assert changes["fused_mul_relu"][0] == "appeared"
    assert changes["fused_add_mul_scatter_reduce_zeros"][0] == "appeared"


def test_a_setting_that_changes_a_kernels_code_shows_in_the_code_diff() -> None:
    """Scalar loops (``cpp.simdlen`` 1) against vectorized ones: one kernel, its code changed."""
    x = torch.randn(64, 64)
    documents = []
    for options in ({}, {"cpp.simdlen": 1}):
        torch._dynamo.reset()
        with inductor_config.patch(options), kernels_named(CPU), captured_code() as codes:
            torch.compile(activation)(x)
        documents.append({"graphs": codes, "kernels": kernels_of(codes)})
    (change,) = code_diff(*documents)
    assert (change.identity, change.change) == ("fused_add_mul_relu", "changed")
    assert change.diff is not None
    # The base's loop steps by the machine's vector width (8 floats with AVX2, 16 with
    # AVX-512), the head's by one.
    steps = re.findall(r"^([-+]).*x0\+=static_cast<int64_t>\((\d+)L\)", change.diff, re.M)
    assert {sign for sign, width in steps if int(width) > 1} == {"-"}, change.diff
    assert ("+", "1") in steps, change.diff
    # Its record function names the graph (graph_0_..., graph_1_...): not a change.
    changed = [line for line in change.diff.splitlines() if line.startswith(("-", "+"))]
    assert not any("record_" in line for line in changed), change.diff


def test_the_regression_the_split_made_names_it_in_its_kernel_diff(
    client: TestClient,
    ingest_headers: dict[str, str],
    scatter_runs: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    """Nightlies of the case, fused then split (the real runs' profiles, latencies 30% apart):
    the step detection finds carries the split in its kernel diff and its hints."""
    noise = np.random.default_rng(0)
    (case,) = {
        tuple(sorted((k, v) for k, v in r.items() if k in CASE_FIELDS and k != "params"))
        for r in scatter_runs[0]["results"]
    }
    for index in range(RUNS):
        run = scatter_runs[index >= BAD]
        level = 1.3 if index >= BAD else 1.0
        samples = [level * (1 + noise.normal(0, 0.005)) for _ in range(5)]
        payload = {
            **run_payload(f"nightly-{index}", [], machine="cpu-box", device="cpu", index=index),
            "results": [{**dict(case), "metric": "latency", "unit": "ms", "samples": samples}],
            "kernel_profiles": run["kernel_profiles"],
        }
        answer = client.post("/api/v1/runs", json=payload, headers=ingest_headers)
        assert answer.status_code == 201, answer.text
    drain(client)
    (step,) = client.get("/api/v1/regressions").json()["items"]
    found = client.get(f"/api/v1/regressions/{step['id']}/kernels").json()["diff"]
    (change,) = found["fusions"]
    assert (change["change"], change["before"]) == (
        "split",
        ["fused_add_mul_relu_scatter_reduce_zeros"],
    )
    # The profiles are the real runs', so their walls need not move the way the samples made
    # the step move: a share of the walls' step only where they did (``kernels.diff``).
    assert found["toward"] == "slower"
    if found["step_us"] > 0:
        assert change["share"] == pytest.approx(change["delta_us"] / found["step_us"])
    else:
        assert change["share"] is None
    assert any(h.startswith("fusion changed: fused_add_mul_relu_scatter") for h in step["hints"])
