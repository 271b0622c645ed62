"""The machine's name when the uploader gives none (issue 16, point 0): the flag, else the name
the files give (v3 runners, Google Benchmark context.host_name, pytest-benchmark
machine_info.node), else the CI runner's variables in order, else this host's, with the device
as a suffix; where each field came from, in --dry-run, the answer and the stored run; a file's
hostile name refused with its place; every real file uploading from a GitHub Actions job."""

import json
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from benchwatch_client.fields import DEFAULT_MACHINE, PROVENANCE
from benchwatch_client.upload import RUNNER_VARIABLES, metadata
from fastapi.testclient import TestClient

from app.core.db import Database
from tests.conftest import make_token
from tests.uploads.test_limits import v3_record
from workers.cli import main

DATA = Path(__file__).parent.parent / "data" / "uploads"
GB_NAMED = (
    DATA / "google_benchmark" / "github-action-benchmark__googlecpp_output.json"
)  # Corgi.local
GB_CONTAINER = DATA / "google_benchmark" / "bpfilter__fd8dc28.json"  # f12cc829b969
PYTEST_NAMED = DATA / "pytest_benchmark" / "rustybt__0002_decimal_backtest.json"  # Mac
PYTEST_UNNAMED = DATA / "pytest_benchmark" / "torchmatch__cu128_20260726T192146Z_subset.json"
V3_HOST = DATA / "pytorch_v3" / "constructed__full_stored_row_example.json"  # example-host, cuda
V3_PHONE = DATA / "pytorch_v3" / "testinfra_fixture__do_not_overwrite_runners_info.json"
V3_UNNAMED = DATA / "pytorch_v3" / "testinfra_fixture__add_loop_inductor_dynamic_gpu.json"
CSV = DATA / "torchbench" / "expected_ci_perf_inductor_torchbench.csv"
TARGETS = (
    "expected_ci_speedup_inductor_torchbench_cpu.csv",
    "pr_time_benchmarks_expected_results.csv",
)
# What a file cannot say, and so a CI user must (the dtype of ci_expected_accuracy names...):
# no machine, nor a device a file says itself.
MUST_GIVE: dict[str, dict[str, str]] = {
    "expected_ci_perf_inductor_torchbench.csv": {
        "suite": "torchbench",
        "precision": "amp",
        "mode": "training",
    },
    "cpu_cppwrapper_BERT_pytorch_performance_fullcols.csv": {
        "suite": "torchbench",
        "config": "cpp_wrapper",
        "precision": "amp",
        "mode": "inference",
        "device": "cpu",
    },
    "inductor_huggingface_training.csv": {"precision": "amp", "device": "cuda"},
    "inductor_torchbench_inference.csv": {"precision": "bf16", "device": "cuda"},
    "rocm__dynamic_inductor_timm_training.csv": {"precision": "amp"},
    "rocm__inductor_torchbench_inference.csv": {"precision": "bf16"},
    "testinfra_fixture__do_not_overwrite_runners_info.json": {"device": "cpu"},  # a phone
}
REAL_FILES = sorted(
    p
    for folder in ("torchbench", "pytorch_v3", "pytest_benchmark", "google_benchmark")
    for p in (DATA / folder).iterdir()
    if p.suffix in (".csv", ".json", ".jsonl") and p.name not in TARGETS
)
CI_PREFIXES = ("GITHUB", "BENCHWATCH", "CI_", "BUILDKITE", "GITLAB", "JENKINS")
GITHUB = {
    "GITHUB_ACTIONS": "true",
    "GITHUB_SHA": "3f2c9e1",
    "GITHUB_REF_NAME": "main",
    "GITHUB_SERVER_URL": "https://github.example",
    "GITHUB_REPOSITORY": "org/repo",
    "GITHUB_RUN_ID": "88",
    "GITHUB_RUN_ATTEMPT": "1",
    "GITHUB_JOB": "bench",
    "RUNNER_NAME": "gpu-runner-1",
}


def post(
    client: TestClient, headers: dict[str, str], path: Path | tuple[str, bytes], **fields: str
) -> tuple[int, dict[str, Any]]:
    name, content = (path.name, path.read_bytes()) if isinstance(path, Path) else path
    answer = client.post(
        "/api/v1/uploads", files=[("file", (name, content))], data=fields, headers=headers
    )
    return answer.status_code, answer.json()


# --- the server: upload field, then the files, then default_machine --------------------------


@pytest.mark.parametrize(
    ("path", "fields", "name", "source"),
    [
        (GB_NAMED, {"machine": "m1"}, "m1", "upload field machine"),
        (GB_NAMED, {}, "Corgi.local-cpu", "file {}: context.host_name 'Corgi.local' and the"),
        (PYTEST_NAMED, {}, "Mac-cpu", "file {}: machine_info.node 'Mac' and the device"),
        (V3_HOST, {}, "example-host-cuda", "file {}: record 0 runners[0].extra_info.hostname"),
        (V3_PHONE, {"device": "cpu"}, "Apple-iPhone-15-cpu", "file {}: record 0 runners[0].name"),
        (GB_NAMED, {DEFAULT_MACHINE: "r"}, "Corgi.local-cpu", "file {}: context.host_name"),
        (PYTEST_UNNAMED, {DEFAULT_MACHINE: "r"}, "r-cpu", "upload field default_machine 'r'"),
        # a container's made-up host name yields to the runner's: it is new in every job
        (GB_CONTAINER, {DEFAULT_MACHINE: "r"}, "r-cpu", "upload field default_machine 'r'"),
        (GB_CONTAINER, {}, "f12cc829b969-cpu", "file {}: context.host_name"),
        # the device is not added twice; spaces become dashes
        (V3_UNNAMED, {DEFAULT_MACHINE: "h100-cuda-2"}, "h100-cuda-2", "upload field"),
        (V3_UNNAMED, {DEFAULT_MACHINE: " GitHub Actions 2 "}, "GitHub-Actions-2-cuda", "upload"),
    ],
    ids=lambda v: v.name if isinstance(v, Path) else None,
)
def test_the_machine_is_the_uploads_else_the_files_else_the_default(
    client: TestClient,
    ingest_headers: dict[str, str],
    path: Path,
    fields: dict[str, str],
    name: str,
    source: str,
) -> None:
    status, run = post(client, ingest_headers, path, **fields)
    assert status == 201, run
    assert run["machine"]["name"] == name
    found = run["extra"]["provenance"]["machine.name"]  # in the answer, for curl users
    assert found.startswith(source.format(path.name)), found
    stored = client.get(f"/api/v1/runs/{run['id']}").json()
    assert stored["extra"]["provenance"] == run["extra"]["provenance"]


def test_the_provenance_of_each_field_is_stored(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    said = {"channel": "flag --channel", DEFAULT_MACHINE: "RUNNER_NAME", "commit": "GITHUB_SHA"}
    status, run = post(
        client,
        ingest_headers,
        PYTEST_UNNAMED,
        channel="pr",
        commit="abc",
        default_machine="gpu-runner-1",
        provenance=json.dumps(said),
    )
    assert status == 201, run
    assert run["extra"]["provenance"] == {
        "machine.name": "RUNNER_NAME 'gpu-runner-1' and the device",
        "machine.device": "default for pytest-benchmark (cpu; give device= otherwise)",
        "environment.channel": "flag --channel",
        "environment.python": f"file {PYTEST_UNNAMED.name}: machine_info.python_version",
        "key": "a hash of the files and the fields",
        "trigger": "default (ci)",
        "commit": "GITHUB_SHA",
        "started_at": f"file {PYTEST_UNNAMED.name}: datetime",
    }


def test_files_naming_different_machines_are_one_upload_only_with_a_machine(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    files = [("file", (p.name, p.read_bytes())) for p in (PYTEST_NAMED, PYTEST_UNNAMED, GB_NAMED)]
    answer = client.post("/api/v1/uploads", files=files, headers=ingest_headers)
    assert answer.status_code == 422, answer.text
    (error,) = answer.json()["errors"]
    assert (error["file"], error["field"]) == (GB_NAMED.name, "context.host_name")
    assert "'Mac'" in error["message"]
    given = client.post(
        "/api/v1/uploads", files=files, data={"machine": "m"}, headers=ingest_headers
    )
    assert given.status_code == 201, given.text


def test_what_nothing_names_is_asked_for(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    status, body = post(client, ingest_headers, V3_PHONE)
    assert status == 422
    assert [e["field"] for e in body["errors"]] == ["device"]
    status, body = post(client, ingest_headers, PYTEST_UNNAMED)
    assert status == 422
    assert [e["field"] for e in body["errors"]] == ["machine"]
    assert "give machine=" in body["errors"][0]["message"]


# --- hostile names ----------------------------------------------------------------------------


def gbench(host: str) -> bytes:
    entry = {"name": "BM_x", "run_name": "BM_x", "run_type": "iteration", "iterations": 1}
    entry |= {"real_time": 1.0, "cpu_time": 1.0, "time_unit": "ns"}
    return json.dumps({"context": {"host_name": host}, "benchmarks": [entry]}).encode()


def v3_host(host: str) -> bytes:
    runner = {"name": "cuda", "type": "NVIDIA H100", "extra_info": {"hostname": host}}
    other = v3_record(model={"name": "mul"}, runners=[runner])
    return json.dumps([v3_record(runners=[runner]), other]).encode()


HOSTILE_NAMES = {
    "markup": "<script>alert(1)</script>",
    "path": "../../etc/passwd",
    "newline": "box\nX-Injected: 1",
    "NUL": "box\x00",
    "long": "b" * 129,
    "huge": "b" * 200_000,
    "dash first": "-rf",
}


@pytest.mark.both_dialects
@pytest.mark.parametrize("host", HOSTILE_NAMES.values(), ids=HOSTILE_NAMES.keys())
def test_a_hostile_name_in_a_file_is_a_422_naming_its_place(
    client: TestClient, ingest_headers: dict[str, str], host: str
) -> None:
    nul = "\x00" in host  # refused as the JSON is read, for any string, with its line
    gb, v3 = {"format": "google-benchmark"}, {"format": "pytorch-v3"}
    status, body = post(client, ingest_headers, ("gb.json", gbench(host)), **gb)
    assert status == 422, body
    (error,) = body["errors"]
    assert error["file"] == "gb.json"
    assert error["line"] if nul else error["field"] == "context.host_name"
    assert nul or "give machine=" in error["message"]
    assert len(json.dumps(body)) < 2000  # the answer quotes a bounded part of the name
    status, body = post(client, ingest_headers, ("v3.json", v3_host(host)), **v3)
    assert status == 422, body
    (error,) = body["errors"]
    assert error["file"] == "v3.json"
    if not nul:
        assert (error["record"], error["field"]) == (0, "runners[0].extra_info.hostname")
    status, body = post(client, ingest_headers, CSV, **MUST_GIVE[CSV.name], default_machine=host)
    assert status == 422, body
    assert body["errors"][0]["field"] == DEFAULT_MACHINE
    assert client.get("/api/v1/runs").json()["items"] == []
    # given a machine, the upload does not use the file's name, and is not refused for it
    status, body = post(client, ingest_headers, ("gb.json", gbench(host)), machine="m", **gb)
    assert status == (422 if nul else 201), body


@pytest.mark.parametrize(
    "said",
    ["[1]", "{", json.dumps({"machine": ""}), json.dumps({"nope": "x"}), "x" * 9000],
    ids=["list", "broken", "empty source", "unknown field", "huge"],
)
@pytest.mark.both_dialects
def test_a_bad_provenance_field_is_a_422(
    client: TestClient, ingest_headers: dict[str, str], said: str
) -> None:
    status, body = post(client, ingest_headers, GB_NAMED, provenance=said)
    assert status == 422, body
    assert body["errors"][0]["field"] == PROVENANCE


# --- the client: flag, then the CI runner's variables in order, then the host ---------------


def test_the_clients_default_machine_follows_the_runner_variables_in_order() -> None:
    values = {var: f"runner-{i}" for i, var in enumerate(RUNNER_VARIABLES)}
    for i, var in enumerate(RUNNER_VARIABLES):
        env = {v: values[v] for v in RUNNER_VARIABLES[i:]}
        if i:
            env[RUNNER_VARIABLES[0]] = " "  # set but blank: no name
        fields = metadata({}, [], env, host="host-1")
        assert fields[DEFAULT_MACHINE] == values[var]
        assert json.loads(fields[PROVENANCE]) == {DEFAULT_MACHINE: var}
    fields = metadata({}, [], {}, host="host-1")
    assert (fields[DEFAULT_MACHINE], json.loads(fields[PROVENANCE])) == (
        "host-1",
        {DEFAULT_MACHINE: "this host's name"},
    )
    flagged = metadata({"machine": "m", "tier": None}, [], values)
    assert DEFAULT_MACHINE not in flagged
    assert json.loads(flagged[PROVENANCE]) == {"machine": "flag --machine"}


@dataclass(frozen=True)
class Done:
    """What one ``benchwatch upload`` said."""

    returncode: int
    stdout: str
    stderr: str


Cli = Callable[..., Done]


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Cli:
    """``benchwatch upload ARGS`` in this process, in a CI environment of ``env`` alone."""

    def upload(*args: str, env: dict[str, str]) -> Done:
        with monkeypatch.context() as scoped:
            for name in list(os.environ):
                if name.startswith(CI_PREFIXES) or name in (
                    *RUNNER_VARIABLES,
                    "CI",
                    "BUILD_NUMBER",
                ):
                    scoped.delenv(name)
            for name, value in env.items():
                scoped.setenv(name, value)
            capsys.readouterr()
            code = main(["upload", *args])
            out = capsys.readouterr()
        return Done(code, out.out, out.err)

    return upload


def test_dry_run_says_where_each_field_comes_from(cli: Cli) -> None:
    done = cli(str(V3_UNNAMED), "--dry-run", "--channel", "pr", env=GITHUB)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert (
        "machine.name = gpu-runner-1-cuda  (from RUNNER_NAME 'gpu-runner-1' and the device)"
        in lines
    )
    assert "environment.channel = pr  (from flag --channel)" in lines
    assert "commit = 3f2c9e1  (from GITHUB_SHA)" in lines
    assert any(line.startswith("key = gha-88-1  (from GITHUB_RUN_ID") for line in lines)
    named = cli(str(GB_NAMED), "--dry-run", env=GITHUB)  # the file's own name wins
    assert f"from file {GB_NAMED.name}: context.host_name 'Corgi.local'" in named.stdout
    flagged = cli(str(GB_NAMED), "--dry-run", "--machine", "m", env=GITHUB)
    assert "machine.name = m  (from flag --machine)" in flagged.stdout.splitlines()
    local = cli(str(V3_UNNAMED), "--dry-run", env={})  # outside CI: this host's name
    host = socket.gethostname().strip().replace(" ", "-")
    assert f"machine.name = {host}-cuda  (from this host's name" in local.stdout


@pytest.mark.slow
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_every_real_file_uploads_from_github_actions_without_a_machine(
    live_server: str, database: Database, client: TestClient, cli: Cli
) -> None:
    """As a new user would: RUNNER_NAME set, no --machine; only what a file cannot say."""
    env = GITHUB | {
        "BENCHWATCH_SERVER": live_server,
        "BENCHWATCH_TOKEN": make_token(database, "ingest"),
    }
    machines = {}
    for path in REAL_FILES:
        flags = [f"--{k}={v}" for k, v in MUST_GIVE.get(path.name, {}).items()]
        done = cli(str(path), *flags, env=env)
        assert done.returncode == 0, (path.name, done.stderr)
        (line,) = [x for x in done.stdout.splitlines() if x.startswith("machine.name = ")]
        machines[path.name] = line.removeprefix("machine.name = ").split()[0]
    assert len(REAL_FILES) == 24  # 23 real files and one generated
    runs = client.get("/api/v1/runs", params={"limit": 100}).json()["items"]
    # One workflow: its uploads make one run per machine (and channel), each file a shard.
    assert sorted(run["machine"]["name"] for run in runs) == sorted(set(machines.values()))
    assert sum(run["result_count"] for run in runs) > 0
    assert machines[GB_NAMED.name] == "Corgi.local-cpu"
    assert machines[GB_CONTAINER.name] == "gpu-runner-1-cpu"
    assert machines[PYTEST_NAMED.name] == "Mac-cpu"
    assert machines[V3_HOST.name] == "example-host-cuda"
    assert machines[V3_UNNAMED.name] == "gpu-runner-1-cuda"
    assert machines[CSV.name] == "gpu-runner-1-cuda"
    assert machines["rocm__inductor_torchbench_inference.csv"] == "gpu-runner-1-rocm"
    assert {run["extra"]["provenance"]["commit"] for run in runs} == {"GITHUB_SHA"}
    assert {run["extra"]["provenance"]["environment.channel"] for run in runs} == {
        "default (nightly)"
    }
