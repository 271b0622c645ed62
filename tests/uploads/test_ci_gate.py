"""`benchwatch upload` in CI, end to end: shard jobs make one run; a pull request is gated."""

import json
from pathlib import Path

import numpy as np
from fastapi.testclient import TestClient

from app.core.db import Database
from tests.anomalies.test_service import history_rows
from tests.conftest import make_token
from tests.factories import nightly, result, run_payload
from tests.uploads.test_api import cli


def github_env(tmp_path: Path, job: str, **more: str) -> dict[str, str]:
    return {
        "GITHUB_ACTIONS": "true",
        "GITHUB_RUN_ID": "777",
        "GITHUB_RUN_ATTEMPT": "1",
        "GITHUB_JOB": job,
        "GITHUB_SHA": "a" * 40,
        "GITHUB_REF_NAME": "main",
        "GITHUB_REPOSITORY": "org/repo",
        "GITHUB_SERVER_URL": "https://github.example",
        **more,
    }


def test_three_shard_jobs_of_a_workflow_upload_one_run(
    live_server: str, database: Database, tmp_path: Path, client: TestClient
) -> None:
    token = make_token(database, "ingest")
    models = [("resnet50", "bert"), ("llama", "vit"), ("t5", "gpt2")]
    for shard, names in enumerate(models):
        path = tmp_path / f"shard-{shard}.json"
        rows = [result(model=m, value=1.0 + i) for i, m in enumerate(names)]
        path.write_text(json.dumps(run_payload("ignored", rows, machine="ci-box")))
        env = github_env(tmp_path, f"bench-{shard}") | {
            "BENCHWATCH_SERVER": live_server,
            "BENCHWATCH_TOKEN": token,
        }
        done = cli(str(path), "--format", "native", "--shards", "3", env=env)
        assert done.returncode == 0, done.stderr
        if shard < 2:
            assert "waits for its other shards (3 expected)" in done.stdout
    runs = client.get("/api/v1/runs").json()["items"]
    assert len(runs) == 1
    (run,) = runs
    assert (run["status"], run["result_count"]) == ("completed", 6)
    assert run["key"] == "gha-777-1/ci-box/nightly"


def test_a_pull_request_one_model_slower_fails_the_gate(
    live_server: str,
    database: Database,
    tmp_path: Path,
    client: TestClient,
    ingest_headers: dict[str, str],
) -> None:
    noise = np.random.default_rng(0)
    for index in range(25):  # the default branch's history
        payload = nightly(index, history_rows(index, noise))
        assert client.post("/api/v1/runs", json=payload, headers=ingest_headers).status_code == 201

    def bert_eager_slower(model: str, config: str, _: int) -> dict[str, float]:
        return {"latency": 12.0} if (model, config) == ("bert", "eager") else {}

    pr = nightly(25, history_rows(25, noise, bert_eager_slower))
    path = tmp_path / "pr.json"
    path.write_text(json.dumps({k: v for k, v in pr.items() if k != "key"}))
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 5, "head": {"sha": "b" * 40}}}))
    summary = tmp_path / "summary.md"
    env = github_env(
        tmp_path,
        "bench",
        GITHUB_REF_NAME="5/merge",
        GITHUB_HEAD_REF="faster-attention",
        GITHUB_EVENT_PATH=str(event),
        GITHUB_STEP_SUMMARY=str(summary),
        BENCHWATCH_SERVER=live_server,
        BENCHWATCH_TOKEN=make_token(database, "ingest"),
    )
    done = cli(str(path), "--format", "native", "--fail-on-regression", env=env)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "bert" in done.stdout
    assert "regression" in done.stdout.lower()
    assert "bert" in summary.read_text()
    runs = client.get("/api/v1/runs", params={"limit": 100}).json()["items"]
    pr_run = next(r for r in runs if r["branch"] == "faster-attention")
    assert pr_run["channel"] == "nightly@faster-attention"
    assert pr_run["commit"] == "b" * 40  # the pull request's head, not GitHub's merge commit
    # The default branch never saw it: no regression was detected there.
    assert client.get("/api/v1/regressions").json()["items"] == []

    done = cli(str(path), "--format", "native", "--fail-on-regression", "--report-only", env=env)
    assert done.returncode == 0, done.stdout + done.stderr  # a retry, reported only
