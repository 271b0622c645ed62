"""GET /summary and GET /compare on stored runs."""

from typing import Any

from fastapi.testclient import TestClient

from tests.factories import result, run_payload


def model_rows(
    model: str, speedup: float | None, accuracy: str, compile_s: float = 30.0
) -> list[dict[str, Any]]:
    common = {
        "model": model,
        "config": "inductor_with_cudagraphs",
        "precision": "amp",
        "mode": "training",
    }
    speed = (
        result(metric="speedup", value=speedup, **common)
        if speedup is not None
        else result(metric="speedup", value=None, status="failed", reason="crash", **common)
    )
    return [
        speed,
        result(metric="accuracy", value=None, text_value=accuracy, **common),
        result(metric="compilation_latency", value=compile_s, **common),
        result(metric="abs_latency", value=10.0, **common),
    ]


def post(
    client: TestClient, headers: dict[str, str], key: str, index: int, rows: list[dict[str, Any]]
) -> int:
    response = client.post(
        "/api/v1/runs", json=run_payload(key, rows, index=index), headers=headers
    )
    assert response.status_code == 201, response.text
    run_id: int = response.json()["id"]
    return run_id


def test_summary_of_latest_run_and_against_a_base(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    base_id = post(
        client,
        ingest_headers,
        "base",
        0,
        model_rows("a", 2.0, "pass") + model_rows("b", 1.0, "pass"),
    )
    new_id = post(
        client,
        ingest_headers,
        "new",
        1,
        model_rows("a", 2.0, "pass")
        + model_rows("b", None, "fail_to_run")
        + model_rows("c", 0.5, "pass", compile_s=90.0),
    )
    summary = client.get("/api/v1/summary", params={"machine": "h100-8"}).json()
    assert summary["run"]["id"] == new_id
    (group,) = summary["groups"]
    assert (group["suite"], group["config"], group["precision"], group["mode"]) == (
        "torchbench",
        "cudagraphs",
        "amp",
        "training",
    )
    new = group["new"]
    assert (new["pass_count"], new["total_count"]) == (2, 3)
    assert abs(new["geomean_speedup"] - 1.0) < 1e-9
    assert new["mean_compile_time_s"] == 60.0
    assert group["base"] is None

    both = client.get(
        "/api/v1/summary", params={"machine": "h100-8", "base_run_id": base_id, "common_only": True}
    ).json()
    assert both["machine"] == "h100-8"
    (group,) = both["groups"]
    by_id = client.get("/api/v1/summary", params={"run_id": base_id}).json()
    assert by_id["run"]["id"] == base_id
    assert by_id["machine"] == "h100-8"
    assert (group["new"]["total_count"], group["base"]["total_count"]) == (2, 2)
    assert group["base"]["pass_rate"] == 1.0
    assert group["new"]["pass_rate"] == 0.5


def test_summary_errors(client: TestClient) -> None:
    response = client.get("/api/v1/summary", params={"machine": "nope"})
    assert response.status_code == 404
    assert "nope" in response.json()["detail"]
    missing = client.get("/api/v1/summary")
    assert missing.status_code == 422
    assert "machine" in missing.json()["detail"]


def test_compare_two_runs(client: TestClient, ingest_headers: dict[str, str]) -> None:
    base_id = post(
        client,
        ingest_headers,
        "base",
        0,
        [
            result(model="a", value=10.0),
            result(model="b", value=10.0),
            result(model="c", value=10.0),
            result(model="d", value=10.0),
            result(model="a", metric="accuracy", value=None, text_value="pass"),
        ],
    )
    new_id = post(
        client,
        ingest_headers,
        "new",
        1,
        [
            result(model="a", value=12.0),
            result(model="b", value=9.0),
            result(model="c", value=10.2),
            result(model="e", value=1.0),
            result(model="a", metric="accuracy", value=None, text_value="fail_accuracy"),
        ],
    )
    body = client.get(
        "/api/v1/compare", params={"base_run_id": base_id, "new_run_id": new_id}
    ).json()
    verdicts = {(r["model"], r["metric"]): (r["verdict"], r["rel_change"]) for r in body["rows"]}
    assert verdicts[("a", "latency")] == ("worse", 0.2)  # latency: lower is better
    assert verdicts[("b", "latency")] == ("better", -0.1)
    assert verdicts[("c", "latency")][0] == "unchanged"
    assert verdicts[("d", "latency")] == ("missing", None)
    assert verdicts[("e", "latency")] == ("new", None)
    assert verdicts[("a", "accuracy")][0] == "now_fails"
    only_a = client.get(
        "/api/v1/compare",
        params={
            "base_run_id": base_id,
            "new_run_id": new_id,
            "metric": "latency",
            "threshold": 0.25,
        },
    ).json()["rows"]
    assert {r["verdict"] for r in only_a} == {"unchanged", "missing", "new"}
    assert (
        client.get(
            "/api/v1/compare", params={"base_run_id": base_id, "new_run_id": 999}
        ).status_code
        == 404
    )
