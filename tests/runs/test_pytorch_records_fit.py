"""The data model holds what PyTorch's benchmark files carry, without loss.

The format parsers come later (upload formats); here the files are mapped by hand onto the
native payload to show that every field has a place to live and reads back unchanged.
"""

import csv
import json
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

DATA = Path(__file__).parent.parent / "data"


def post_and_read(
    client: TestClient, headers: dict[str, str], payload: dict[str, Any]
) -> dict[str, Any]:
    response = client.post("/api/v1/runs", json=payload, headers=headers)
    assert response.status_code == 201, response.text
    run: dict[str, Any] = client.get(f"/api/v1/runs/{response.json()['id']}").json()
    return run


def test_v3_stored_row(client: TestClient, ingest_headers: dict[str, str]) -> None:
    row = json.loads((DATA / "v3_full_stored_row_example.json").read_text())
    runner = row["runners"][0]
    bench, model, metric = row["benchmark"], row["model"], row["metric"]
    payload = {
        "key": f"{row['workflow_id']}-{row['job_id']}-{row['run_attempt']}",
        "machine": {
            "name": "h100-1",
            "device": runner["name"],
            "arch": runner["type"],
            "cpu": runner["cpu_info"],
            "cpu_count": runner["cpu_count"],
            "host_memory_gb": runner["avail_mem_in_gb"],
            "gpu_count": runner["gpu_count"],
            "gpu_memory_gb": runner["avail_gpu_mem_in_gb"],
            "hostname": runner["extra_info"]["hostname"],
        },
        "environment": {"channel": "nightly", "extra": {"dependencies": row["dependencies"]}},
        "commit": row["head_sha"],
        "branch": row["head_branch"],
        "started_at": "2025-01-01T00:00:00Z",
        "extra": {
            k: row[k]
            for k in (
                "repo",
                "name",
                "workflow_id",
                "job_id",
                "run_attempt",
                "schema_version",
                "timestamp",
            )
        },
        "results": [
            {
                "suite": model["origins"][0],
                "model": model["name"],
                "mode": bench["mode"],
                "precision": bench["dtype"],
                "config": "inductor_with_cudagraphs",
                "batch_size": bench["extra_info"]["batch_size"],
                "metric": metric["name"],
                "samples": metric["benchmark_values"],
                "extra": {"benchmark": bench, "model": model},
            }
        ],
    }
    run = post_and_read(client, ingest_headers, payload)
    assert run["machine"]["arch_short"] == "h100"
    assert run["machine"]["gpu_memory_gb"] == 79
    assert run["hostname"] == "example-host"
    assert run["extra"]["workflow_id"] == 1
    (stored,) = run["results"]
    assert (
        stored["suite"],
        stored["model"],
        stored["config"],
        stored["precision"],
        stored["mode"],
        stored["batch_size"],
    ) == ("torchbench", "BERT_pytorch", "cudagraphs", "amp", "training", 16)
    assert (stored["value"], stored["samples"], stored["unit"]) == (2.6028, [2.6028], "x")
    assert stored["extra"] == {"benchmark": bench, "model": model}


def test_v3_attention_records_with_their_units(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    records = json.loads((DATA / "v3_transformer_test_dashboard.json").read_text())
    results = [
        {
            "suite": r["benchmark"]["name"],
            "model": r["model"]["name"],
            "mode": "inference",
            "precision": r["benchmark"]["dtype"],
            "config": "max_autotune",
            "params": {"shape": r["benchmark"]["extra_info"]["shape"]},
            "metric": r["metric"]["name"],
            "unit": r["metric"]["unit"],
            "higher_is_better": r["metric"]["name"] != "forward_latency",
            "samples": r["metric"]["benchmark_values"],
            "extra": {"benchmark": r["benchmark"]["extra_info"]},
        }
        for r in records
    ]
    payload = {
        "key": "attention",
        "machine": {"name": "graviton", "device": "cpu"},
        "results": results,
    }
    run = post_and_read(client, ingest_headers, payload)
    stored = {r["metric"]: r for r in run["results"]}
    assert {m: (r["unit"], r["value"]) for m, r in stored.items()} == {
        r["metric"]["name"]: (r["metric"]["unit"], r["metric"]["benchmark_values"][0])
        for r in records
    }


def test_dynamo_performance_csv_with_every_column(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    with (DATA / "cpu_cppwrapper_BERT_pytorch_performance_fullcols.csv").open() as handle:
        (row,) = csv.DictReader(handle)
    metrics = {k: float(v) for k, v in row.items() if k not in ("dev", "name", "batch_size")}
    assert len(metrics) == 13
    results = [
        {
            "suite": "torchbench",
            "model": row["name"],
            "precision": "amp",
            "config": "inductor_cpp_wrapper",
            "batch_size": int(row["batch_size"]),
            "metric": name,
            "value": value,
        }
        for name, value in metrics.items()
    ]
    payload = {
        "key": "csv",
        "machine": {"name": "cpu-x86", "device": row["dev"]},
        "results": results,
    }
    run = post_and_read(client, ingest_headers, payload)
    assert {r["metric"]: r["value"] for r in run["results"]} == metrics
    assert {r["config"] for r in run["results"]} == {"cpp_wrapper"}
    units = {r["metric"]: r["unit"] for r in run["results"]}
    assert (units["abs_latency"], units["compilation_latency"], units["graph_breaks"]) == (
        "ms",
        "s",
        "count",
    )


def test_openapi_example_works_when_pasted(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    schema = client.get("/openapi.json").json()
    (example,) = schema["components"]["schemas"]["RunIn"]["examples"]
    assert client.post("/api/v1/runs", json=example, headers=ingest_headers).status_code == 201
    assert client.get("/docs").status_code == 200
