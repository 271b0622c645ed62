"""Every real file of PyTorch's tooling, pytest-benchmark, Google Benchmark, tritonbench, vLLM,
torch.utils.benchmark and github-action-benchmark uploads through the API and the CLI (with
format=auto: each folder's files are recognised by their name and content) and reads back with
the right identity, unit and direction; a re-upload changes nothing; malformed files are
refused with file, line and field, storing nothing."""

import os
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.benchmarks import vocabulary as vocab
from app.core.db import Database
from app.runs.schemas import ResultIn
from app.uploads.base import Hints, UploadFile
from app.uploads.formats import BY_NAME
from app.uploads.service import sniff
from tests.conftest import make_token
from workers.cli import main

pytestmark = pytest.mark.both_dialects

DATA = Path(__file__).parent.parent / "data" / "uploads"
# What each file's name cannot say (ci_expected_accuracy names carry no dtype, ...).
HINTS: dict[str, dict[str, str]] = {
    "expected_ci_perf_inductor_torchbench.csv": {
        "suite": "torchbench",
        "config": "cudagraphs",
        "precision": "amp",
        "mode": "training",
        "device": "cuda",
    },
    "cpu_cppwrapper_BERT_pytorch_performance_fullcols.csv": {
        "suite": "torchbench",
        "config": "cpp_wrapper",
        "precision": "amp",
        "mode": "inference",
        "device": "cpu",
    },
    "inductor_huggingface_training.csv": {"precision": "amp", "device": "cuda"},
    "rocm__dynamic_inductor_timm_training.csv": {"precision": "amp"},
    "rocm__inductor_torchbench_inference.csv": {"precision": "bf16"},
    "inductor_torchbench_inference.csv": {"precision": "bf16", "device": "cuda"},
}
TARGETS = (
    "expected_ci_speedup_inductor_torchbench_cpu.csv",
    "pr_time_benchmarks_expected_results.csv",
)
FOLDERS = (
    "torchbench",
    "pytorch_v3",
    "pytest_benchmark",
    "google_benchmark",
    "tritonbench",
    "vllm",
    "torch_utils_benchmark",
    "github_action_benchmark",
)
# The device each folder's files were measured on, where the files do not say it themselves.
CPU_FOLDERS = frozenset(
    {
        "pytest_benchmark",
        "google_benchmark",
        "tritonbench",
        "torch_utils_benchmark",
        "github_action_benchmark",
    }
)
FILES = sorted(
    p
    for folder in FOLDERS
    for p in (DATA / folder).iterdir()
    if p.suffix in (".csv", ".json", ".jsonl", ".pkl") and p.name not in TARGETS
)


def fields(path: Path) -> dict[str, str]:
    """The upload's metadata: a machine name, the file's hints, a device where none is said."""
    hints = HINTS.get(path.name, {})
    device = {} if path.parent.name == "torchbench" else {"device": hints.get("device", "cuda")}
    if path.parent.name in CPU_FOLDERS:
        device = {"device": "cpu"}
    return {"machine": "fixture-box", **device, **hints}


def parsed_rows(path: Path) -> list[ResultIn]:
    file = UploadFile(path.name, path.read_bytes())
    hint_fields = {
        k: v
        for k, v in fields(path).items()
        if k in ("suite", "config", "precision", "mode", "device")
    }
    parsed = BY_NAME[sniff(file)].parse(file, Hints(**hint_fields))
    return [ResultIn.model_validate(row) for row in parsed.results]


def identity(row: dict[str, object]) -> tuple[object, ...]:
    keys = ("suite", "model", "mode", "precision", "config", "batch_size", "metric")
    return (*(row[k] for k in keys), vocab_json(row["params"]))


def vocab_json(params: object) -> str:
    import json

    return json.dumps(params or {}, sort_keys=True)


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_real_file_uploads_and_reads_back(
    client: TestClient, ingest_headers: dict[str, str], path: Path
) -> None:
    upload = {"files": [("file", (path.name, path.read_bytes()))], "data": fields(path)}
    first = client.post("/api/v1/uploads", headers=ingest_headers, **upload)  # type: ignore[arg-type]
    assert first.status_code == 201, first.text
    stored = {
        identity(r): r for r in client.get(f"/api/v1/runs/{first.json()['id']}").json()["results"]
    }
    expected = parsed_rows(path)
    assert len(stored) == len(expected) > 0
    for row in expected:
        got = stored[identity(row.model_dump())]
        factor = vocab.unit_factor(row.resolved_unit, got["unit"])
        assert factor is not None, (row.metric, row.resolved_unit, got["unit"])
        assert got["higher_is_better"] == row.resolved_direction
        assert got["status"] == row.status
        assert got["text_value"] == row.text_value
        if row.value is not None:
            assert got["value"] == pytest.approx(row.value * factor)
    again = client.post("/api/v1/uploads", headers=ingest_headers, **upload)  # type: ignore[arg-type]
    assert (again.status_code, again.json()["id"]) == (200, first.json()["id"])
    assert len(client.get("/api/v1/runs").json()["items"]) == 1  # still one run


@pytest.mark.parametrize("name", TARGETS)
def test_expectation_files_are_refused_as_targets(
    client: TestClient, ingest_headers: dict[str, str], name: str
) -> None:
    content = (DATA / "torchbench" / name).read_bytes()
    answer = client.post(
        "/api/v1/uploads",
        files=[("file", (name, content))],
        data={"machine": "m"},
        headers=ingest_headers,
    )
    assert answer.status_code == 422
    assert "expected targets" in answer.json()["errors"][0]["message"]


@pytest.mark.parametrize(
    ("name", "content", "line", "field"),
    [
        (  # truncated JSON
            "bench.json",
            (DATA / "pytest_benchmark" / "rustybt__0002_decimal_backtest.json").read_bytes()[:700],
            None,
            None,
        ),
        (  # wrong columns: no model name
            "inductor_no_cudagraphs_torchbench_amp_training_cuda_performance.csv",
            b"dev,model,speedup\ncuda,BERT,2.5\n",
            1,
            "name",
        ),
        (  # a truncated last row with a cut-off number
            "inductor_no_cudagraphs_torchbench_amp_training_cuda_performance.csv",
            b"dev,name,batch_size,speedup\ncuda,BERT,16,2.5\ncuda,T5,8,1.2e",
            3,
            "speedup",
        ),
    ],
)
def test_malformed_files_name_file_line_and_field_and_store_nothing(
    client: TestClient,
    ingest_headers: dict[str, str],
    name: str,
    content: bytes,
    line: int | None,
    field: str | None,
) -> None:
    answer = client.post(
        "/api/v1/uploads",
        files=[("file", (name, content))],
        data={"machine": "m"},
        headers=ingest_headers,
    )
    assert answer.status_code == 422, answer.text
    (error,) = answer.json()["errors"]
    assert error["file"] == name
    if line is not None:
        assert (error["line"], error["field"]) == (line, field)
    else:
        assert error["line"] is not None  # where the JSON broke
    assert client.get("/api/v1/runs").json()["items"] == []


@pytest.mark.slow
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_every_real_file_uploads_through_the_cli(
    live_server: str,
    database: Database,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The command's own code in this process (tests/uploads/test_api.py runs it as a command)."""
    for name in [k for k in os.environ if k.startswith(("GITHUB", "BENCHWATCH"))]:
        monkeypatch.delenv(name)
    access = [f"--server={live_server}", f"--token={make_token(database, 'ingest')}"]
    for index, path in enumerate(FILES):  # one machine each: their devices differ
        flags = [f"--{k}={v}" for k, v in {**fields(path), "machine": f"box-{index}"}.items()]
        code = main(["upload", str(path), *access, *flags])
        out = capsys.readouterr()
        assert code == 0, (path.name, out.err)
        assert "stored" in out.out
