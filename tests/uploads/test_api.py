"""`POST /api/v1/uploads`: files of each format become one run, idempotently, all-or-nothing;
bad files are rejected with the file, line and field; `benchwatch upload` end to end."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.core.db import Database
from tests.anomalies.test_service import BAD, RUNS, dynamic_bert_slower, history_rows
from tests.conftest import make_token
from tests.factories import nightly, result, run_payload

DATA = Path(__file__).parent.parent / "data" / "uploads"
PERF = DATA / "torchbench" / "expected_ci_perf_inductor_torchbench.csv"
PERF_NAME = "inductor_no_cudagraphs_torchbench_amp_training_cuda_performance.csv"
MACHINE = {"machine": "h100-ci", "channel": "nightly"}


def upload(
    client: TestClient, headers: dict[str, str], files: list[tuple[str, bytes]], **fields: str
) -> tuple[int, dict[str, object]]:
    response = client.post(
        "/api/v1/uploads",
        files=[("file", (name, content)) for name, content in files],
        data={**MACHINE, **fields},
        headers=headers,
    )
    return response.status_code, response.json()


def refused_upload(
    client: TestClient,
    headers: dict[str, str],
    name: str,
    content: bytes,
    status: int,
    **fields: str,
) -> dict[str, Any]:
    """The one error of an upload of the file ``name`` refused with ``status``; none was stored."""
    got, body = upload(client, headers, [(name, content)], **fields)
    assert got == status, body
    errors = body["errors"]
    assert isinstance(errors, list)
    (error,) = errors
    assert error["file"] == name
    assert client.get("/api/v1/runs").json()["items"] == []
    error_found: dict[str, Any] = error
    return error_found


def test_a_torchbench_csv_becomes_one_run_and_a_retry_returns_it(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    files = [(PERF_NAME, PERF.read_bytes())]
    status, run = upload(client, ingest_headers, files)
    assert status == 201, run
    assert run["machine"]["device"] == "cuda"  # type: ignore[index]
    stored = client.get(f"/api/v1/runs/{run['id']}").json()
    configs = {r["config"] for r in stored["results"]}
    assert configs == {"default"}  # inductor_no_cudagraphs
    assert {r["precision"] for r in stored["results"]} == {"amp"}
    again_status, again = upload(client, ingest_headers, files)
    assert (again_status, again["id"]) == (200, run["id"])  # same files: same key


def test_every_format_is_recognised_by_auto(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    samples = {
        "pytorch-v3": DATA / "pytorch_v3",
        "pytest-benchmark": DATA / "pytest_benchmark",
        "google-benchmark": DATA / "google_benchmark",
    }
    for fmt, folder in samples.items():
        sample = sorted(p for p in folder.glob("*.json*") if "generate" not in p.name)[0]
        status, run = upload(
            client, ingest_headers, [(sample.name, sample.read_bytes())], device="cpu"
        )
        assert status == 201, (fmt, run)
        assert run["extra"]["upload"]["formats"] == [fmt]  # type: ignore[index]


def test_a_raw_body_and_query_metadata_work_too(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    response = client.post(
        "/api/v1/uploads",
        params={**MACHINE, "filename": PERF_NAME, "format": "torchbench-csv", "key": "raw-1"},
        content=PERF.read_bytes(),
        headers={**ingest_headers, "Content-Type": "text/csv"},
    )
    assert response.status_code == 201, response.text
    assert response.json()["key"] == "raw-1"


def test_a_native_payload_can_be_uploaded(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    payload = run_payload("native-1", [result(value=3.0)])
    status, run = upload(client, ingest_headers, [("run.json", json.dumps(payload).encode())])
    assert status == 201, run
    assert run["key"] == "native-1"


def test_a_bad_row_rejects_the_upload_with_file_line_and_field(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    bad = b"dev,name,batch_size,speedup\ncuda,BERT,16,2.5\ncuda,T5,8,fast\n"
    status, body = upload(client, ingest_headers, [(PERF_NAME, bad)])
    assert status == 422
    (error,) = body["errors"]  # type: ignore[misc]
    assert (error["file"], error["line"], error["field"]) == (PERF_NAME, 3, "speedup")
    assert client.get("/api/v1/runs").json()["items"] == []  # nothing stored


def test_an_unknown_format_or_missing_machine_is_explained(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    status, body = upload(client, ingest_headers, [("x.bin", b"\x00\x01")], format="nope")
    assert status == 422
    assert "unknown format" in str(body)
    response = client.post(
        "/api/v1/uploads",
        files=[("file", (PERF_NAME, PERF.read_bytes()))],
        headers=ingest_headers,
    )
    assert response.status_code == 422
    assert "machine" in response.text


def test_uploads_need_the_ingest_scope(client: TestClient, database: Database) -> None:
    files = [("file", (PERF_NAME, PERF.read_bytes()))]
    assert client.post("/api/v1/uploads", files=files, data=MACHINE).status_code == 401
    triage = {"Authorization": f"Bearer {make_token(database, 'triage', name='t')}"}
    assert (
        client.post("/api/v1/uploads", files=files, data=MACHINE, headers=triage).status_code == 403
    )


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "workers.cli", "upload", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if not k.startswith(("GITHUB", "BENCHWATCH"))}
        | (env or {}),
        check=False,
    )


def test_dry_run_parses_here_and_sends_nothing(tmp_path: Path) -> None:
    named = tmp_path / PERF_NAME
    named.write_bytes(PERF.read_bytes())
    done = cli(str(named), "--machine", "h100-ci", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert '"results": 64' in done.stdout
    bad = tmp_path / PERF_NAME.replace("performance", "accuracy")
    bad.write_text("dev,name,batch_size,accuracy\ncuda,BERT,x,pass\n")
    rejected = cli(str(bad), "--machine", "h100-ci", "--dry-run")
    assert rejected.returncode == 1
    assert "batch_size" in rejected.stderr


def test_an_unreachable_server_exits_2(tmp_path: Path) -> None:
    named = tmp_path / PERF_NAME
    named.write_bytes(PERF.read_bytes())
    done = cli(
        str(named),
        "--machine",
        "h",
        "--server",
        "http://127.0.0.1:9",
        "--token",
        "t",
        "--retries",
        "0",
    )
    assert done.returncode == 2
    assert "unreachable" in done.stderr


def test_upload_to_a_live_server_from_github_actions(
    live_server: str, database: Database, tmp_path: Path
) -> None:
    named = tmp_path / PERF_NAME
    named.write_bytes(PERF.read_bytes())
    env = {
        "BENCHWATCH_SERVER": live_server,
        "BENCHWATCH_TOKEN": make_token(database, "ingest", name="gha"),
        "GITHUB_ACTIONS": "true",
        "GITHUB_SHA": "3f2c9e1",
        "GITHUB_REF_NAME": "main",
        "GITHUB_RUN_ID": "77",
        "GITHUB_RUN_ATTEMPT": "1",
        "GITHUB_JOB": "perf",
    }
    first = cli(str(named), "--machine", "h100-ci", "--fail-on-regression", env=env)
    assert first.returncode == 0, first.stderr
    # the workflow's run on this machine and channel; this job's upload is a shard of it
    assert "stored: key gha-77-1/h100-ci/nightly of project default" in first.stdout
    assert "no regressions" in first.stdout
    retry = cli(str(named), "--machine", "h100-ci", env=env)
    assert retry.returncode == 0
    assert "already stored" in retry.stdout
    wrong = cli(str(named), "--machine", "h100-ci", "--tier", "smoke", env=env)
    assert wrong.returncode == 1  # the same job's shard, a different payload: 409


@pytest.mark.slow
def test_fail_on_regression_exits_3_when_the_upload_confirms_a_step(
    live_server: str,
    database: Database,
    tmp_path: Path,
    client: TestClient,
    ingest_headers: dict[str, str],
) -> None:
    noise = np.random.default_rng(0)
    payloads = [
        nightly(i, history_rows(i, noise, dynamic_bert_slower), torch=f"2.6.0.dev{i}")
        for i in range(RUNS)
    ]
    for payload in payloads[:BAD]:  # the history before the step, straight through the API
        assert client.post("/api/v1/runs", json=payload, headers=ingest_headers).status_code == 201
    client.app.state.publisher.drain()  # type: ignore[attr-defined]  # detection done first
    env = {"BENCHWATCH_SERVER": live_server, "BENCHWATCH_TOKEN": make_token(database, "ingest")}
    for index in range(BAD, RUNS):  # then one CI upload per run until one confirms the step
        path = tmp_path / f"run-{index}.json"
        path.write_text(json.dumps(payloads[index]))
        done = cli(str(path), "--format", "native", "--fail-on-regression", env=env)
        if done.returncode == 3:
            break
        assert done.returncode == 0, done.stderr
    assert done.returncode == 3, done.stdout
    assert "bert dynamic" in done.stdout
    assert re.search(r"latency \+(9\.[5-9]|10\.[0-5])%", done.stdout), done.stdout
    # 20 sigmas at its first point: suspected there, so the upload of the step fails
    assert index == BAD
    assert "[suspected]" in done.stdout
