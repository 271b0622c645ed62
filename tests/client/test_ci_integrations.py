"""The light client, the GitHub Action and the GitLab component, run as CI runs them.

A fresh virtual environment holds only the light client (``pip install ./client``): it
uploads every sample file of ``tests/data/uploads`` to a live server. The action and the
component are run from their real files (``tests.client.ci_runners``) with the inputs of
docs/ci.md's own examples, against a live server and a fake GitHub, and gate a pull request.
"""

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from fastapi.testclient import TestClient

from app.core.db import Database
from tests.client.ci_runners import (
    ROOT,
    action_checkout,
    read_outputs,
    run_action,
    run_component,
)
from tests.client.test_gate_github import HEAD, MERGE, TOKEN, FakeGitHub, event_file, github
from tests.conftest import make_token

DOCS = ROOT / "docs" / "ci.md"
UPLOADS = ROOT / "tests" / "data" / "uploads"
MODELS = {"BERT_pytorch": 40.0, "resnet50": 20.0, "hf_T5": 80.0}
HISTORY = 8  # default-branch runs before the pull request

__all__ = ["github"]  # the fake GitHub's fixture, used here


@pytest.fixture(scope="module")
def light_client(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``benchwatch-upload`` in a fresh virtual environment holding the light client alone."""
    venv = tmp_path_factory.mktemp("runner") / "benchwatch-client"
    source = action_checkout(tmp_path_factory.mktemp("checkout")) / "client"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", source],
        check=True,
        timeout=300,
    )
    return venv / "bin" / "benchwatch-upload"


def installed(client: Path) -> set[str]:
    listed = subprocess.run(
        [str(client.parent / "pip"), "list", "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    return {package["name"].lower() for package in json.loads(listed.stdout)}


def test_the_light_client_holds_nothing_of_the_server(light_client: Path) -> None:
    packages = installed(light_client)
    assert {"benchwatch-client", "httpx"} <= packages
    server_side = {"benchwatch", "fastapi", "sqlalchemy", "scipy", "numpy", "plotly", "celery"}
    assert not packages & server_side
    python = light_client.parent / "python"
    cannot = subprocess.run(  # away from the checkout, whose folders import as packages
        [python, "-c", "import app"], capture_output=True, cwd=light_client.parents[2], check=False
    )
    assert cannot.returncode != 0


SKIPPED = {
    "expected_ci_speedup_inductor_torchbench_cpu.csv",
    "pr_time_benchmarks_expected_results.csv",
}


def fixture_files() -> list[Path]:
    return sorted(
        path
        for path in UPLOADS.glob("*/*")
        if path.suffix in (".csv", ".json", ".jsonl", ".pkl", ".pickle")
        and path.name not in SKIPPED
    )


def test_the_light_client_alone_uploads_every_fixture(
    light_client: Path, live_server: str, database: Database, client: TestClient, tmp_path: Path
) -> None:
    from tests.uploads.test_fixtures import fields

    token = make_token(database, "ingest")
    files = fixture_files()
    assert len(files) >= 30
    for number, path in enumerate(files):
        given = fields(path) | {"machine": f"fixture-{number}"}  # a machine keeps one device
        flags = [f"--{name.replace('_', '-')}={value}" for name, value in given.items()]
        done = subprocess.run(
            [light_client, path, f"--key=fixture-{number}", *flags],
            env={"PATH": "/usr/bin:/bin", "BENCHWATCH_SERVER": live_server}
            | {"BENCHWATCH_TOKEN": token, "HOME": str(tmp_path)},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, f"{path.name}: {done.stdout}{done.stderr}"
        assert re.search(r"^run \d+ stored: ", done.stdout, re.M), done.stdout
    runs = client.get("/api/v1/runs", params={"limit": 200}).json()["items"]
    assert len({run["key"] for run in runs}) == len(files)


# --- docs/ci.md's examples, run ---


def docs_yaml() -> list[Any]:
    blocks = re.findall(r"```yaml\n(.*?)```", DOCS.read_text(), re.S)
    return [yaml.safe_load(block) for block in blocks]


def docs_action_step(workflow: str) -> tuple[dict[str, str], str]:
    """The inputs of the action's step in the docs' workflow named ``workflow``, and the file
    its benchmark step writes."""
    (found,) = [doc for doc in docs_yaml() if isinstance(doc, dict) and doc.get("name") == workflow]
    (job,) = found["jobs"].values()
    (step,) = [s for s in job["steps"] if str(s.get("uses", "")).endswith("/benchwatch@v1")]
    written = re.search(r"--output \.\./([\w./-]+)", json.dumps(job["steps"]))
    assert written
    return {
        k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in step["with"].items()
    }, (written.group(1))


def docs_component(job_name: str) -> tuple[dict[str, str], str]:
    """The inputs the docs' pipeline gives the component whose ``needs`` is ``job_name``."""
    for doc in docs_yaml():
        if isinstance(doc, dict) and "include" in doc and job_name in doc:
            (included,) = doc["include"]
            written = re.search(r"--output ([\w./-]+)", json.dumps(doc[job_name]["script"]))
            assert written
            assert included["inputs"]["needs"] == [job_name]
            inputs = {k: v for k, v in included["inputs"].items() if k != "needs"}
            return inputs, written.group(1)
    raise AssertionError(f"no pipeline with {job_name} in docs/ci.md")


def dynamo_csv(dev: str, seed: int, slower: str = "") -> str:
    """A dynamo performance CSV of three models, ``slower`` 30% slower than in the history."""
    noise = np.random.default_rng(seed)
    lines = ["dev,name,batch_size,speedup,abs_latency,compilation_latency"]
    for model, latency in MODELS.items():
        scale = 1.3 if model == slower else 1 + noise.normal(0, 0.003)
        lines.append(f"{dev},{model},8,{2.0 / scale:.4f},{latency * scale:.4f},30.0")
    return "\n".join(lines) + "\n"


def post_history(
    client: TestClient, database: Database, name: str, machine: str, channel: str
) -> None:
    """The default branch's runs of the file ``name``, uploaded through the API."""
    headers = {"Authorization": f"Bearer {make_token(database, 'ingest', name='history')}"}
    for index in range(HISTORY):
        answer = client.post(
            "/api/v1/uploads",
            headers=headers,
            files=[("file", (name, dynamo_csv("cuda", index)))],
            data={
                "machine": machine,
                "channel": channel,
                "key": f"main-{index}",
                "commit": f"{index:040x}",
                "branch": "main",
                "started_at": f"2026-11-{index + 1:02d}T02:00:00Z",
            },
        )
        assert answer.status_code == 201, answer.text


def history_and_change(
    client: TestClient,
    database: Database,
    workspace: Path,
    docs: tuple[dict[str, str], str],
    slower: str,
) -> str:
    """The default branch's history of the file the docs' benchmark step writes, on the docs'
    machine and channel, then that file with ``slower`` 30% slower, where the step writes it;
    an ingest token for the job."""
    inputs, written = docs
    post_history(client, database, Path(written).name, inputs["machine"], inputs["channel"])
    (workspace / written).write_text(dynamo_csv("cuda", HISTORY, slower=slower))
    return make_token(database, "ingest")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A job's working directory, with its results folder."""
    (tmp_path / "results").mkdir()
    return tmp_path


def test_the_action_of_the_docs_gates_a_pull_request(
    live_server: str,
    database: Database,
    client: TestClient,
    github: FakeGitHub,
    workspace: Path,
    light_client: Path,
) -> None:
    inputs, _ = docs = docs_action_step("perf-pr")
    token = history_and_change(client, database, workspace, docs, slower="BERT_pytorch")
    resolved = {
        k: v.replace("${{ vars.BENCHWATCH_SERVER }}", live_server).replace(
            "${{ secrets.BENCHWATCH_TOKEN }}", token
        )
        for k, v in inputs.items()
    }
    event = {
        "pull_request": {"number": 7, "head": {"sha": HEAD}, "base": {"sha": "c" * 40}},
        "repository": {"default_branch": "main"},
    }
    env = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_RUN_ID": "991",
        "GITHUB_RUN_ATTEMPT": "1",
        "GITHUB_JOB": "gate",
        "GITHUB_WORKFLOW": "perf-pr",
        "GITHUB_SHA": MERGE,
        "GITHUB_REF_NAME": "7/merge",
        "GITHUB_HEAD_REF": "faster-attention",
        "GITHUB_REPOSITORY": "perf/bench",
        "GITHUB_SERVER_URL": "https://github.example",
        "GITHUB_API_URL": github.base,
        "GITHUB_EVENT_PATH": event_file(workspace, event),
        "GITHUB_TOKEN_FOR_ACTION": TOKEN,
        "RUNNER_NAME": "gpu-runner-1",
        "RUNNER_TEMP": str(light_client.parents[2]),
    }
    failed = run_action(resolved, env, workspace)
    assert failed.status == 3, failed.log  # the gate failed the step
    outputs = failed.outputs
    run = client.get(f"/api/v1/runs/{outputs['run-id']}").json()
    assert (run["branch"], run["commit"]) == ("faster-attention", HEAD)
    assert outputs["run-url"] == f"{live_server}/runs/{run['id']}"
    assert outputs["gating"] == outputs["regressions"] != "0"
    assert int(outputs["verdicts"]) == sum(
        int(outputs[k]) for k in ("regressions", "improvements", "passes", "no-baseline", "errors")
    )
    assert "BERT" in failed.summary
    assert f"run {run['id']}" in failed.summary
    assert github.check_runs, failed.log
    assert github.check_runs[-1]["conclusion"] == "failure"
    assert len(github.comments) == 1

    inputs_reported = {**resolved, "fail-on-regression": "false"}
    reported = run_action(inputs_reported, {**env, "GITHUB_RUN_ATTEMPT": "2"}, workspace)
    assert reported.status == 0, reported.log  # reported, not failed
    assert reported.outputs["regressions"] == outputs["regressions"]
    assert len(github.comments) == 1  # the one comment, edited


def test_the_component_of_the_docs_gates_a_merge_request(
    live_server: str, database: Database, client: TestClient, workspace: Path, light_client: Path
) -> None:
    inputs, _ = docs = docs_component("perf-mr")
    token = history_and_change(client, database, workspace, docs, slower="hf_T5")
    source = action_checkout(workspace) / "client"
    inputs = {**inputs, "server": live_server, "client": str(source)}
    env = {
        "GITLAB_CI": "true",
        "CI_PIPELINE_ID": "4242",
        "CI_JOB_ID": "88",
        "CI_JOB_NAME": "benchwatch-upload",
        "CI_COMMIT_SHA": "d" * 40,
        "CI_COMMIT_REF_NAME": "mr-branch",
        "CI_MERGE_REQUEST_SOURCE_BRANCH_NAME": "mr-branch",
        "CI_DEFAULT_BRANCH": "main",
        "CI_JOB_URL": "https://gitlab.example/tools/bench/-/jobs/88",
        "BENCHWATCH_TOKEN": token,
        "TMPDIR": str(light_client.parents[2]),
    }
    failed = run_component(inputs, env, workspace)
    assert failed.status == 3, failed.log
    run = client.get(f"/api/v1/runs/{failed.outputs['BENCHWATCH_RUN_ID']}").json()
    assert (run["branch"], run["commit"]) == ("mr-branch", "d" * 40)
    assert failed.outputs["BENCHWATCH_GATING"] != "0"
    assert "hf\\_T5" in failed.summary or "hf_T5" in failed.summary
    assert read_outputs(workspace / "benchwatch.env") == failed.outputs

    reported = run_component({**inputs, "fail-on-regression": "false"}, env, workspace)
    assert reported.status == 0, reported.log


def test_a_glob_that_matches_nothing_fails_the_job_before_it_installs(workspace: Path) -> None:
    runner = workspace / "runner"
    runner.mkdir()
    (workspace / "results" / "a.csv").write_text("dev,name\n")
    files = "results/*.csv results/*.json"  # the first matches, the second does not
    env = {"RUNNER_TEMP": str(runner), "GITHUB_ACTIONS": "true"}
    failed = run_action(
        {"server": "http://127.0.0.1:9", "token": "t", "files": files}, env, workspace
    )
    assert failed.status == 1
    assert "no file matches results/*.json" in failed.log
    given = {"server": "http://127.0.0.1:9", "files": files, "client": "not-installed"}
    gitlab = run_component(given, {"TMPDIR": str(runner)}, workspace)
    assert gitlab.status == 1
    assert "no file matches results/*.json" in gitlab.log
    assert not (runner / "benchwatch-client").exists()  # nothing was installed


def test_the_action_is_well_formed_and_the_docs_use_it_as_declared() -> None:
    """What actionlint would check of a composite action and its callers (actionlint itself
    cannot be installed here: its PyPI package fetches its binary from GitHub as it builds)."""
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    assert {"name", "description", "inputs", "outputs", "runs"} <= set(action)
    assert action["runs"]["using"] == "composite"
    steps = action["runs"]["steps"]
    ids = {step["id"] for step in steps if "id" in step}
    for step in steps:
        assert step["shell"] == "bash", step.get("name")
        assert step["run"].strip(), step.get("name")
    for name, spec in action["inputs"].items():
        assert re.fullmatch(r"[a-z][a-z0-9-]*", name), name
        assert spec["description"], name
        assert spec.get("required") or "default" in spec, f"{name}: neither required nor default"
    for name, spec in action["outputs"].items():
        found = re.fullmatch(r"\$\{\{ steps\.([a-z-]+)\.outputs\.([a-z_]+) \}\}", spec["value"])
        assert found, f"output {name}: {spec['value']}"
        assert found.group(1) in ids, f"output {name}: {spec['value']}"
    used = 0
    for doc in docs_yaml():
        if not (isinstance(doc, dict) and "jobs" in doc):
            continue
        for job in doc["jobs"].values():
            for step in job["steps"]:
                if str(step.get("uses", "")).endswith("/benchwatch@v1"):
                    used += 1
                    assert set(step["with"]) <= set(action["inputs"]), step["with"]
                    required = {n for n, s in action["inputs"].items() if s.get("required")}
                    assert required <= set(step["with"])
            text = json.dumps(job)
            for output in re.findall(r"steps\.benchwatch\.outputs\.([a-z-]+)", text):
                assert output in action["outputs"], output
    assert used >= 2
