"""Kernel profiles through the API: stored once per case, read back, diffed, bounded."""

import copy
import re
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select, update

from app.core.db import Database
from app.kernels import service as kernels
from app.kernels.models import KernelProfile
from app.runs.schemas import MAX_PROFILE_KERNELS
from tests.anomalies.test_service import BAD, dynamic_bert_slower, post_history, regressions
from tests.conftest import make_token
from tests.factories import example_run

CASE = {
    "suite": "torchbench",
    "model": "resnet50",
    "mode": "inference",
    "precision": "bf16",
    "config": "cudagraphs",
    "batch_size": 32,
}


def profile(wall_us: float = 100.0, **times: float) -> dict[str, Any]:
    """resnet50's profile (a case of ``example_run``) with kernels of one call each."""
    kernels_in = [{"name": name, "calls": 1, "time_us": us} for name, us in times.items()]
    return {**CASE, "timing": "device", "calls": 3, "wall_us": wall_us, "kernels": kernels_in}


def run_with(key: str, *profiles: dict[str, Any]) -> dict[str, Any]:
    return example_run(key=key, kernel_profiles=list(profiles))


def stored(database: Database) -> int:
    with database.session_scope() as session:
        return session.scalar(select(func.count()).select_from(KernelProfile)) or 0


def test_a_runs_profiles_are_kept_once_and_read_by_identity(
    client: TestClient, ingest_headers: dict[str, str], database: Database
) -> None:
    payload = run_with(
        "p1",
        profile(
            triton_poi_fused_add_0=10.0,
            triton_poi_fused_add_5=4.0,  # the same fusion in another graph
            triton_red_fused_sum_1=30.0,
        ),
    )
    first = client.post("/api/v1/runs", json=payload, headers=ingest_headers)
    retry = client.post("/api/v1/runs", json=payload, headers=ingest_headers)
    assert (first.status_code, retry.status_code) == (201, 200), first.text
    run_id = first.json()["id"]
    assert stored(database) == 1
    page = client.get(f"/api/v1/runs/{run_id}/kernels").json()
    assert page["total"] == 1
    (read,) = page["items"]
    assert read["benchmark"]["model"] == "resnet50"
    assert (read["timing"], read["calls"], read["wall_us"], read["kernel_us"]) == (
        "device",
        3,
        100.0,
        44.0,
    )
    summed, added = read["kernels"]
    assert (summed["kind"], summed["name"], summed["time_us"]) == ("fused", "sum", 30.0)
    assert (added["name"], added["instances"], added["time_us"]) == ("add", 2, 14.0)
    assert (added["mean_us"], added["share"]) == (7.0, 0.14)  # two calls; of a 100 us call
    assert added["names"] == ["triton_poi_fused_add_0", "triton_poi_fused_add_5"]
    one_case = client.get(
        f"/api/v1/runs/{run_id}/kernels", params={"benchmark_id": read["benchmark"]["id"] + 1}
    )
    assert one_case.json()["total"] == 0
    assert client.get("/api/v1/runs/999/kernels").status_code == 404


def test_two_runs_diffed_kernel_by_kernel(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    base = run_with("base", profile(100.0, triton_poi_fused_add_relu_0=40.0))
    head = run_with(
        "head", profile(150.0, triton_poi_fused_add_2=40.0, triton_poi_fused_relu_3=30.0)
    )
    base_id = client.post("/api/v1/runs", json=base, headers=ingest_headers).json()["id"]
    head_id = client.post("/api/v1/runs", json=head, headers=ingest_headers).json()["id"]
    (read,) = client.get(f"/api/v1/runs/{base_id}/kernels").json()["items"]
    params = {"base_run": base_id, "head_run": head_id, "benchmark_id": read["benchmark"]["id"]}
    answer = client.get("/api/v1/kernels/diff", params=params)
    assert answer.status_code == 200, answer.text
    found = answer.json()["diff"]
    assert found["step_us"] == 50.0
    assert [(k["name"], k["change"]) for k in found["kernels"]] == [
        ("add", "appeared"),
        ("relu", "appeared"),
        ("add_relu", "disappeared"),
    ]
    (split,) = found["fusions"]
    assert (split["change"], split["before"]) == ("split", ["fused_add_relu"])
    assert split["share"] == pytest.approx(30 / 50)
    assert found["outside_delta_us"] == pytest.approx(20.0)
    missing = client.get("/api/v1/kernels/diff", params={**params, "head_run": head_id + 5})
    assert missing.status_code == 404
    assert "(head) has no kernel profile" in missing.json()["detail"]


def test_a_regressions_kernels_from_last_good_to_first_bad(
    client: TestClient, ingest_headers: dict[str, str], database: Database
) -> None:
    ids = post_history(client, ingest_headers, dynamic_bert_slower)
    (step,) = regressions(client)
    url = f"/api/v1/regressions/{step['id']}/kernels"
    assert client.get(url).status_code == 404  # CI's runs came without profiles
    benchmark_id = step["series"]["benchmark"]["id"]
    sides = {  # a step of 1000 us, 780 of it in the softmax
        ids[BAD - 1]: (10_000.0, kernels.KernelTime("triton_red_fused__softmax_0", 1, 600.0)),
        ids[BAD]: (11_000.0, kernels.KernelTime("triton_red_fused__softmax_2", 1, 1380.0)),
    }
    with database.session_scope() as session:
        for run_id, (wall_us, softmax) in sides.items():
            case = kernels.CaseProfile(benchmark_id, "device", 5, wall_us, [softmax])
            kernels.store(session, run_id, [case])
    answer = client.get(url)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["base_run_id"], body["head_run_id"]) == (ids[BAD - 1], ids[BAD])
    assert body["diff"]["headline"] == "78% of the step is in `fused_softmax` (+130%)"
    # The head's wall measured below the base's (a preempted profile on the CPU): the
    # regression still ranks its slower softmax first; the two runs compared as such rank
    # by their walls.
    with database.session_scope() as session:
        session.execute(
            update(KernelProfile).where(KernelProfile.run_id == ids[BAD]).values(wall_us=9_000.0)
        )
    against = client.get(url).json()["diff"]
    assert (against["toward"], against["headline"]) == ("slower", "")
    assert [(k["name"], k["change"], k["share"]) for k in against["kernels"]] == [
        ("softmax", "slower", None)
    ]
    page = client.get(f"/regressions/{step['id']}/kernels")
    assert "the kernels rank slower first, the finding" in page.text, page.text
    params = {"base_run": ids[BAD - 1], "head_run": ids[BAD], "benchmark_id": benchmark_id}
    walls = client.get("/api/v1/kernels/diff", params=params).json()["diff"]
    assert (walls["toward"], walls["kernels"][0]["share"]) == ("faster", -0.78)


@pytest.mark.both_dialects
@pytest.mark.parametrize(
    ("change", "loc", "words"),
    [
        (
            lambda p: p["kernel_profiles"][0].update(model="bert"),
            ["kernel_profiles", 0],
            "no result",
        ),
        (
            lambda p: p["kernel_profiles"].append(copy.deepcopy(p["kernel_profiles"][0])),
            ["kernel_profiles", 1],
            "duplicates",
        ),
        (lambda p: p["kernel_profiles"][0]["kernels"][0].update(name="k" * 4001), ["name"], "4000"),
        (
            lambda p: p["kernel_profiles"][0]["kernels"][0].update(time_us=-1),
            ["time_us"],
            "greater",
        ),
        (lambda p: p["kernel_profiles"][0].update(calls=0), ["calls"], "greater"),
        (lambda p: p["kernel_profiles"][0].update(timing="gpu"), ["timing"], "device"),
        (lambda p: p["kernel_profiles"][0].update(graphs=2**31), ["graphs"], "less"),
        (lambda p: p["kernel_profiles"][0]["kernels"][0].update(graph="g" * 65), ["graph"], "64"),
        (
            lambda p: p["kernel_profiles"][0].update(
                kernels=[{"name": "k", "calls": 1, "time_us": 1}] * (MAX_PROFILE_KERNELS + 1)
            ),
            ["kernels"],
            str(MAX_PROFILE_KERNELS),
        ),
        (lambda p: p["kernel_profiles"][0]["kernels"][0].update(name="a\x00b"), ["name"], "NUL"),
    ],
)
def test_bad_profiles_are_refused_where_they_are_and_store_nothing(
    client: TestClient,
    ingest_headers: dict[str, str],
    database: Database,
    change: Any,
    loc: list[Any],
    words: str,
) -> None:
    payload = run_with("bad", profile(triton_poi_fused_add_0=1.0))
    change(payload)
    answer = client.post("/api/v1/runs", json=payload, headers=ingest_headers)
    assert answer.status_code == 422, answer.text
    text = answer.text
    assert words in text
    assert all(str(part) in text for part in loc)
    assert stored(database) == 0
    assert client.get("/api/v1/runs").json()["items"] == []


@pytest.mark.both_dialects
def test_long_kernel_names_are_kept_within_their_bounds(
    client: TestClient, ingest_headers: dict[str, str], database: Database
) -> None:
    name = "void " + "cutlass::Kernel<" * 200 + ">" * 200 + "(int)"
    payload = run_with("long", profile(**{name: 5.0, "x" * 4000: 1.0}))
    answer = client.post("/api/v1/runs", json=payload, headers=ingest_headers)
    assert answer.status_code == 201, answer.text
    (read,) = client.get(f"/api/v1/runs/{answer.json()['id']}/kernels").json()["items"]
    assert all(len(k["name"]) <= 200 for k in read["kernels"])
    assert all(len(n) <= 200 for k in read["kernels"] for n in k["names"])
    assert len(read["kernels"]) == 2


def test_a_deleted_run_takes_its_profiles_along(
    client: TestClient, ingest_headers: dict[str, str], database: Database
) -> None:
    run_id = client.post(
        "/api/v1/runs", json=run_with("gone", profile(aten_mm=1.0)), headers=ingest_headers
    ).json()["id"]
    assert stored(database) == 1
    admin = {"Authorization": f"Bearer {make_token(database, 'admin')}"}
    assert client.delete(f"/api/v1/runs/{run_id}", headers=admin).status_code == 200
    assert stored(database) == 0


def test_the_compare_page_links_each_profiled_case_to_its_kernels(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    ids = []
    for key, wall in (("one", 100.0), ("two", 130.0)):
        payload = run_with(key, profile(wall, triton_poi_fused_add_0=wall / 2))
        eager = {**payload["results"][0], "config": "eager"}  # the same case, eager too
        payload["results"].append(eager)
        payload["kernel_profiles"].append(
            {**payload["kernel_profiles"][0], "config": "eager", "wall_us": 3 * wall}
        )
        ids.append(client.post("/api/v1/runs", json=payload, headers=ingest_headers).json()["id"])
    runs = client.get(
        "/compare",
        params={"kind": "runs", "machine": "mi300x-8", "base_run": ids[0], "new_run": ids[1]},
    ).text
    links = re.findall(r'href="(/kernels\?[^"]+)"', runs)
    assert len(links) == 2  # resnet50 under cudagraphs and under eager; hf_T5 failed
    page = client.get(links[0].replace("&amp;", "&"))
    assert page.status_code == 200
    assert "Kernels of resnet50" in page.text

    configs = client.get(
        "/compare",
        params={
            "kind": "configs",
            "machine": "mi300x-8",
            "base_config": "eager",
            "new_config": "cudagraphs",
        },
    ).text
    (link,) = re.findall(r'href="(/kernels\?[^"]+)"', configs)
    assert f"base_run={ids[1]}&amp;head_run={ids[1]}" in link
    assert "head_benchmark=" in link
    page = client.get(link.replace("&amp;", "&"))
    assert "eager against cudagraphs" in page.text
    diff = page.text[page.text.index('id="kernel-step"') :]
    assert "390 us → 130 us" in diff  # eager's call against the compiled one's
