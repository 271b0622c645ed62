"""Generated code: cut out of Inductor's output, kept compressed, diffed kernel by kernel."""

from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.core.db import Database
from app.corrections.retention import apply_retention
from app.kernels.code import DIFFS_SHOWN, code_diff
from app.kernels.models import KernelCode, KernelProfile
from tests.factories import START
from tests.kernels.test_profiles_api import profile, run_with
from workers.inductor_code import kernels_of

TRITON = """
triton_poi_fused_add_mul_{n} = async_compile.triton('triton_poi_fused_add_mul_{n}', '''
import triton

@triton_heuristics.pointwise(
    size_hints={{'x': 1024}},
    triton_meta={{'signature': {{'in_ptr0': '*fp32'}}}},
    inductor_meta={{'kernel_name': 'triton_poi_fused_add_mul_{n}'}},
)
@triton.jit
def triton_poi_fused_add_mul_{n}(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    x0 = xindex
    tmp0 = tl.load(in_ptr0 + (x0), xmask)
    tmp1 = tmp0 * {factor}
''', device_str='cuda')

cpp_fused_relu_{m} = async_compile.cpp_pybinding(['const float*', 'float*'], r'''
extern "C" void kernel(const float* in_ptr0, float* out_ptr0)
{{
    out_ptr0[x0] = std::max(in_ptr0[x0], 0.0f);
}}
''')

def call(args):
    triton_poi_fused_add_mul_{n}.run(buf0, arg0_1, 1024, stream=stream0)
"""


def output(n: int, m: int, factor: str) -> str:
    return TRITON.format(n=n, m=m, factor=factor)


def test_kernels_are_cut_out_of_the_output_code() -> None:
    triton, cpp = kernels_of([output(0, 1, "2.0")])
    assert triton["name"] == "triton_poi_fused_add_mul_0"
    assert "def triton_poi_fused_add_mul_0(" in triton["source"]
    assert triton["launch"].startswith("@triton_heuristics.pointwise(")
    assert "size_hints" in triton["launch"]
    assert "@triton.jit" not in triton["launch"]
    assert cpp["name"] == "cpp_fused_relu_1"
    assert cpp["source"].strip().startswith('extern "C" void kernel(')
    assert cpp["launch"] == ""


def test_a_renumbered_kernel_is_the_same_and_a_changed_one_is_diffed() -> None:
    base = {"graphs": [], "kernels": kernels_of([output(0, 1, "2.0")])}
    renumbered = {"graphs": [], "kernels": kernels_of([output(3, 7, "2.0")])}
    assert {c.change for c in code_diff(base, renumbered)} == {"same"}
    changed = {"graphs": [], "kernels": kernels_of([output(3, 7, "4.0")])}
    first, second = code_diff(base, changed)
    assert (first.identity, first.change, second.change) == ("fused_add_mul", "changed", "same")
    assert "-    tmp1 = tmp0 * 2.0" in (first.diff or "")
    assert "+    tmp1 = tmp0 * 4.0" in (first.diff or "")
    assert first.names == ["triton_poi_fused_add_mul_3", "triton_poi_fused_add_mul_0"]


def test_only_so_many_kernels_are_diffed_unless_asked_by_name() -> None:
    def kernels(factor: str) -> dict[str, Any]:
        sources = [
            {"name": f"triton_poi_fused_op{i}_{i}", "source": f"x = {i} * {factor}"}
            for i in range(DIFFS_SHOWN + 5)
        ]
        return {"graphs": [], "kernels": sources}

    found = code_diff(kernels("1"), kernels("2"))
    assert sum(c.diff is not None for c in found) == DIFFS_SHOWN
    last = sorted(c.identity for c in found)[-1]
    (asked,) = [c for c in code_diff(kernels("1"), kernels("2"), only=last) if c.diff]
    assert asked.identity == last


def with_code(key: str, factor: str, index: int = 0) -> dict[str, Any]:
    payload = run_with(key, profile(100.0, triton_poi_fused_add_mul_0=40.0))
    code = {"graphs": [output(0, 1, factor)], "kernels": kernels_of([output(0, 1, factor)])}
    payload["kernel_profiles"][0]["code"] = code
    payload["started_at"] = (START + timedelta(days=index)).isoformat()
    return payload


def test_the_code_diff_of_two_runs_and_its_retention(
    client: TestClient, ingest_headers: dict[str, str], database: Database
) -> None:
    ids = [
        client.post(
            "/api/v1/runs", json=with_code(key, factor, day), headers=ingest_headers
        ).json()["id"]
        for key, factor, day in (("old", "2.0", 0), ("new", "4.0", 60))
    ]
    (read,) = client.get(f"/api/v1/runs/{ids[0]}/kernels").json()["items"]
    benchmark = read["benchmark"]["id"]
    params = {"base_run": ids[0], "head_run": ids[1], "benchmark_id": benchmark}
    answer = client.get("/api/v1/kernels/code-diff", params=params)
    assert answer.status_code == 200, answer.text
    changed, same = answer.json()["kernels"]
    assert (changed["identity"], changed["change"], same["change"]) == (
        "fused_add_mul",
        "changed",
        "same",
    )
    assert "+    tmp1 = tmp0 * 4.0" in changed["diff"]
    page = client.get(f"/kernels?base_run={ids[0]}&head_run={ids[1]}&benchmark={benchmark}").text
    assert "Generated code" in page
    assert "+    tmp1 = tmp0 * 4.0" in page

    swept = apply_retention(database, 30, 0, now=START + timedelta(days=61))
    assert swept.code_cleared == 1  # the old run's code went with its samples ...
    with database.session_scope() as session:
        assert session.scalar(select(func.count()).select_from(KernelCode)) == 1
        assert session.scalar(select(func.count()).select_from(KernelProfile)) == 2  # ... not
    missing = client.get("/api/v1/kernels/code-diff", params=params)
    assert missing.status_code == 404
    assert "(base) kept no generated code" in missing.json()["detail"]


@pytest.mark.both_dialects
@pytest.mark.parametrize(
    ("code", "field"),
    [
        ({"graphs": ["x"] * 17}, "graphs"),
        ({"graphs": ["x" * 512_001]}, "graphs"),
        ({"kernels": [{"name": "k", "source": "s" * 64_001}]}, "source"),
        ({"kernels": [{"name": "k", "source": "s"}] * 401}, "kernels"),
        ({"kernels": [{"name": "", "source": "s"}]}, "name"),
        ({"kernels": [{"name": "k", "source": "s", "launch": "l" * 4001}]}, "launch"),
        ({"kernels": [{"name": "k", "source": "a\x00b"}]}, "source"),
    ],
)
def test_bad_code_is_refused_where_it_is(
    client: TestClient,
    ingest_headers: dict[str, str],
    database: Database,
    code: dict[str, Any],
    field: str,
) -> None:
    payload = run_with("bad-code", profile(triton_poi_fused_add_0=1.0))
    payload["kernel_profiles"][0]["code"] = code
    answer = client.post("/api/v1/runs", json=payload, headers=ingest_headers)
    assert answer.status_code == 422, answer.text
    assert field in answer.text
    assert "kernel_profiles" in answer.text
    with database.session_scope() as session:
        assert session.scalar(select(func.count()).select_from(KernelCode)) == 0
