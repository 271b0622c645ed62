"""`POST /api/v1/uploads` with hostile files: 413 or 422 with the file and place, never 5xx, on
SQLite and on Postgres; the parse deadline; the caps on what one answer lists."""

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.core.config import Settings
from app.main import create_app
from app.uploads import limits
from tests.uploads.test_limits import v3_record

pytestmark = pytest.mark.both_dialects

PERF = "inductor_torchbench_amp_training_cuda_performance.csv"
CSV_HEADER = "dev,name,batch_size,speedup"
DIGITS_5000 = "1" * 5000


def v3(*records: dict[str, Any], replace: tuple[str, str] = ("", "")) -> bytes:
    return json.dumps(list(records)).replace(*replace).encode()


def gbench(**changes: Any) -> bytes:
    entry = {
        "name": "BM_x",
        "run_name": "BM_x",
        "run_type": "iteration",
        "iterations": 10,
        "real_time": 1.0,
        "cpu_time": 1.0,
        "time_unit": "ns",
    }
    return json.dumps({"context": {}, "benchmarks": [entry | changes]}).encode()


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


EXTRA = '"extra_info": {}'
# name -> (file name, content, format, status): each of these answered 500 before
HOSTILE = {
    "v3 5,000-digit integer": (
        "r.json",
        v3(v3_record(), replace=("1.0,", f"{DIGITS_5000},")),
        "pytorch-v3",
        422,
    ),
    "v3 nested 995 deep": (
        "r.json",
        v3(v3_record(), replace=(EXTRA, f'"extra_info": {{"x": {nested(995)}}}')),
        "pytorch-v3",
        413,
    ),
    "v3 nested 200 deep": (
        "r.json",
        v3(v3_record(), replace=(EXTRA, f'"extra_info": {{"x": {nested(200)}}}')),
        "pytorch-v3",
        413,
    ),
    "v3 timestamp 1e20": ("r.json", v3(v3_record(timestamp=1e20)), "pytorch-v3", 422),
    "v3 timestamp 1e400": (
        "r.json",
        v3(v3_record(timestamp=1), replace=('"timestamp": 1', '"timestamp": 1e400')),
        "pytorch-v3",
        422,
    ),
    "v3 NUL in a name": ("r.json", v3(v3_record(model={"name": "a\x00b"})), "pytorch-v3", 422),
    "v3 batch_size 2^40": (
        "r.json",
        v3(v3_record(benchmark={"name": "b", "extra_info": {"batch_size": 2**40}})),
        "pytorch-v3",
        422,
    ),
    "gbench family_index a list": ("g.json", gbench(family_index=[1]), "google-benchmark", 422),
    "csv NUL in a name": (
        PERF,
        f"{CSV_HEADER}\ncuda,a\x00b,8,1.5\n".encode(),
        "torchbench-csv",
        422,
    ),
    "csv batch_size 2^40": (
        PERF,
        f"{CSV_HEADER}\ncuda,m,{2**40},1.5\n".encode(),
        "torchbench-csv",
        422,
    ),
    "csv 50,000 columns": (
        PERF,
        ("name," + ",".join(f"c{i}" for i in range(50_000)) + "\nm\n").encode(),
        "torchbench-csv",
        413,
    ),
    "native a JSON list": ("run.json", b"[1, 2]", "native", 422),
    "native 5,000-digit integer": ("run.json", f'{{"key": {DIGITS_5000}}}'.encode(), "native", 422),
}


def post(
    client: TestClient, headers: dict[str, str], name: str, content: bytes, fmt: str, **fields: str
) -> tuple[int, dict[str, Any]]:
    response = client.post(
        "/api/v1/uploads",
        files=[("file", (name, content))],
        data={"machine": "hostile", "device": "cpu", "format": fmt, **fields},
        headers=headers,
    )
    return response.status_code, response.json()


@pytest.mark.parametrize("case", HOSTILE)
def test_a_hostile_file_is_a_4xx_with_its_place(
    client: TestClient, ingest_headers: dict[str, str], case: str
) -> None:
    name, content, fmt, expected = HOSTILE[case]
    status, body = post(client, ingest_headers, name, content, fmt)
    assert status == expected, body
    (error,) = body["errors"]
    assert error["file"] == name
    assert body["error"] == ("UploadTooLarge" if expected == 413 else "BadUpload")
    assert client.get("/api/v1/runs").json()["items"] == []


def test_metadata_that_cannot_be_stored_is_refused(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    status, body = post(client, ingest_headers, "run.json", b"[1, 2]", "native", key="k1")
    assert (status, body["errors"][0]["file"]) == (422, "run.json")  # was a TypeError: 500
    csv = f"{CSV_HEADER}\ncuda,m,8,1.5\n".encode()
    status, body = post(client, ingest_headers, PERF, csv, "torchbench-csv", hostname="a\x00b")
    assert (status, body["errors"][0]["field"]) == (422, "hostname")
    long_name = "x" * limits.MAX_NAME_CHARS + ".csv"
    status, body = post(client, ingest_headers, long_name, csv, "torchbench-csv")
    assert (status, body["errors"][0]["field"]) == (413, "filename")


def test_one_answer_lists_the_first_problems_and_counts_them_all(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    rows = "\n".join(f"cuda,{'m' * 300}{i},8,1.5" for i in range(150))  # model names > 256
    status, body = post(client, ingest_headers, PERF, f"{CSV_HEADER}\n{rows}\n".encode(), "auto")
    assert status == 422
    assert len(body["errors"]) == limits.MAX_ERRORS
    assert body["detail"].startswith(f"150 problem(s) ({limits.MAX_ERRORS} listed)")


def test_auth_and_multipart_errors_answer_in_the_one_error_body(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    anonymous = client.post("/api/v1/uploads", files=[("file", ("a.csv", b"x"))])
    assert anonymous.status_code == 401
    assert anonymous.json()["error"] == "Unauthorized"
    broken = client.post(
        "/api/v1/uploads",
        content=b"--b\r\nContent-Disposition: form-data; name=file; filename=" + b"x" * 100_000,
        headers={**ingest_headers, "Content-Type": "multipart/form-data; boundary=b"},
    )
    assert broken.status_code == 400
    assert broken.json()["error"] == "BadRequest"


@pytest.fixture
def hurried_client(settings: Settings) -> Iterator[TestClient]:
    """A client of an app whose parse deadline has always passed."""
    application = create_app(settings.model_copy(update={"PARSE_TIMEOUT_S": -1.0}))
    with TestClient(application) as test_client:
        yield test_client
    application.state.database.dispose()


def test_an_upload_past_the_parse_deadline_is_a_413(
    hurried_client: TestClient, ingest_headers: dict[str, str]
) -> None:
    csv = f"{CSV_HEADER}\ncuda,m,8,1.5\n".encode()
    status, body = post(hurried_client, ingest_headers, PERF, csv, "torchbench-csv")
    assert status == 413
    assert "BENCHWATCH_PARSE_TIMEOUT_S" in body["detail"]
    assert body["errors"][0]["file"] == PERF
