"""Hostile input costs nothing: every crafted upload or run answers 4xx within 2 s, never 5xx.

Builds inputs meant to make a parser slow (a backtracking pattern, a quadratic check, one
pass per repetition), to exhaust it (huge names, columns, records, samples, nesting) or to
crash it (numbers no column holds, times out of range, NUL characters, wrong JSON types),
for each upload format (``POST /api/v1/uploads``) and for the native ``POST /api/v1/runs``.
Each is sent to the app in process (FastAPI's test client: middleware, routing, parsing,
validation and ingest; no network) on a fresh SQLite file, or on ``--database-url`` (migrated
first), with an ingest token. Every body is built before its clock starts.

Prints one line per case: its name, the status code, the milliseconds of the request and
what the answer says; exits 1 when a case answers 5xx or takes longer than 2 s.

    .venv/bin/python bench/hostile.py [--database-url URL] [--only TEXT]
"""

import argparse
import json
import logging
import re
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.core.config import Settings
from app.core.migrate import upgrade_database
from app.main import create_app
from app.tokens import service as tokens_service

LIMIT_S = 2.0
PEPPER = "hostile-bench-pepper"
UPLOADS = "/api/v1/uploads"
RUNS = "/api/v1/runs"
PERF_CSV = "inductor_torchbench_amp_training_cuda_performance.csv"
CSV_FIELD_LIMIT = 131_072  # the csv module's default field_size_limit()
BIG = 2**40  # fits 64 bits, not the INTEGER columns
DIGITS_5000 = "1" * 5000
DEEP = 995  # Python's json gives up (RecursionError) at about 1,000


@dataclass(frozen=True)
class Case:
    """One crafted request: where it goes and the keyword arguments of ``client.request``.

    ``anonymous`` requests carry no token: what any reader of a public server can send.
    """

    name: str
    path: str
    request: dict[str, Any]
    method: str = "POST"
    anonymous: bool = False


# --- bodies ----------------------------------------------------------------------------------


def upload(name: str, content: bytes, fmt: str, **fields: str) -> dict[str, Any]:
    """A multipart upload of one file, with the metadata every format needs."""
    metadata = {"machine": "hostile-ci", "device": "cpu", "format": fmt, **fields}
    return {"files": [("file", (name, content))], "data": metadata}


def csv_file(*rows: str, header: str = "dev,name,batch_size,speedup") -> bytes:
    """A benchmarks/dynamo performance CSV."""
    return "\n".join((header, *rows, "")).encode()


def v3_record(**changes: Any) -> dict[str, Any]:
    """A valid PyTorch v3 benchmark record, with sections replaced."""
    record: dict[str, Any] = {
        "benchmark": {"name": "hostile", "extra_info": {}},
        "model": {"name": "resnet50"},
        "metric": {"name": "latency", "benchmark_values": [1.5, 1.6]},
    }
    return record | changes


def v3(records: Any, replace: tuple[str, str] | None = None) -> dict[str, Any]:
    """A v3 file; ``replace`` puts literal JSON text (1e400, 5,000 digits) in place of a marker."""
    text = json.dumps(records)
    if replace is not None:
        text = text.replace(*replace)
    return upload("records.json", text.encode(), "pytorch-v3")


def pytest_doc(**entry: Any) -> dict[str, Any]:
    """A pytest-benchmark file of one benchmark, with fields replaced."""
    benchmark = {"name": "test_x", "fullname": "bench.py::test_x", "stats": {"median": 0.001}}
    return {"machine_info": {}, "benchmarks": [benchmark | entry]}


def pytest_file(document: dict[str, Any], replace: tuple[str, str] | None = None) -> dict[str, Any]:
    """A pytest-benchmark upload."""
    text = json.dumps(document)
    if replace is not None:
        text = text.replace(*replace)
    return upload("bench.json", text.encode(), "pytest-benchmark")


def gbench_entry(index: int = 0, **changes: Any) -> dict[str, Any]:
    """One Google Benchmark iteration entry."""
    entry = {
        "name": "BM_x/8",
        "family_index": 0,
        "per_family_instance_index": 0,
        "run_name": "BM_x/8",
        "run_type": "iteration",
        "repetitions": 1,
        "repetition_index": index,
        "threads": 1,
        "iterations": 1000,
        "real_time": 1.5,
        "cpu_time": 1.5,
        "time_unit": "ns",
    }
    return entry | changes


def gbench(entries: Any, replace: tuple[str, str] | None = None) -> dict[str, Any]:
    """A Google Benchmark upload."""
    text = json.dumps({"context": {"executable": "bench_x"}, "benchmarks": entries})
    if replace is not None:
        text = text.replace(*replace)
    return upload("bench_x.json", text.encode(), "google-benchmark")


def run_body(replace: tuple[str, str] | None = None, **changes: Any) -> dict[str, Any]:
    """A native run (docs/example-run.json's shape) as raw JSON, with fields replaced."""
    result = {"suite": "torchbench", "model": "resnet50", "metric": "latency", "value": 4.2}
    run = {"key": "hostile-run", "machine": {"name": "hostile", "device": "cuda"}}
    text = json.dumps(run | {"results": [result]} | changes)
    if replace is not None:
        text = text.replace(*replace)
    return {"content": text.encode(), "headers": {"Content-Type": "application/json"}}


def nested(depth: int) -> str:
    """JSON text of arrays nested ``depth`` deep."""
    return "[" * depth + "]" * depth


def too_big(settings: Settings) -> bytes:
    """One byte over the request body limit."""
    return b" " * (settings.MAX_BODY_BYTES + 1)


# --- the cases -------------------------------------------------------------------------------


def csv_cases() -> list[Case]:
    """The torchbench CSV parser."""
    numeric = "1" * (CSV_FIELD_LIMIT - 1) + "x"
    columns = ",".join(["name", *(f"c{i}" for i in range(50_000))])
    rows = [f"cuda,m{i},8,1.5" for i in range(100_001)]
    return [
        Case(
            "csv: backtracking numeric cell at the csv field limit",
            UPLOADS,
            upload(PERF_CSV, csv_file(f"cuda,m,8,{numeric}"), "torchbench-csv"),
        ),
        Case(
            "csv: numeric cell of 4,095 digits and an x",
            UPLOADS,
            upload(PERF_CSV, csv_file(f"cuda,m,8,{'1' * 4095}x"), "torchbench-csv"),
        ),
        Case(
            "csv: 400-digit number (overflows to inf)",
            UPLOADS,
            upload(PERF_CSV, csv_file(f"cuda,m,8,{'9' * 400}"), "torchbench-csv"),
        ),
        Case(
            "csv: 50,000 columns",
            UPLOADS,
            upload(
                PERF_CSV,
                csv_file("m," + ",".join(["1"] * 50_000), header=columns),
                "torchbench-csv",
            ),
        ),
        Case(
            "csv: 60 MiB line of commas",
            UPLOADS,
            upload(PERF_CSV, csv_file("," * (60 * 2**20)), "torchbench-csv"),
        ),
        Case(
            "csv: 2,000,000 blank lines",
            UPLOADS,
            upload(PERF_CSV, csv_file(*[""] * 2_000_000), "torchbench-csv"),
        ),
        Case(
            "csv: 100,001 rows (results cap)",
            UPLOADS,
            upload(PERF_CSV, csv_file(*rows), "torchbench-csv"),
        ),
        Case(
            "csv: batch_size 2^40",
            UPLOADS,
            upload(PERF_CSV, csv_file(f"cuda,m,{BIG},1.5"), "torchbench-csv"),
        ),
        Case(
            "csv: batch_size of 4,000 digits",
            UPLOADS,
            upload(PERF_CSV, csv_file(f"cuda,m,{'9' * 4000},1.5"), "torchbench-csv"),
        ),
        Case(
            "csv: NUL in a model name",
            UPLOADS,
            upload(PERF_CSV, csv_file("cuda,res\x00net,8,1.5"), "torchbench-csv"),
        ),
    ]


def v3_cases() -> list[Case]:
    """The PyTorch v3 record parser."""
    lines = "\n".join(json.dumps(v3_record(model={"name": f"m{i}"})) for i in range(100_001))
    values = v3_record(metric={"name": "latency", "benchmark_values": [1.0] * 100_001})
    return [
        Case(
            "v3: 5,000-digit integer in benchmark_values",
            UPLOADS,
            v3([v3_record()], ("[1.5, 1.6]", f"[{DIGITS_5000}]")),
        ),
        Case(
            "v3: 5,000-digit integer in extra_info",
            UPLOADS,
            v3([v3_record()], ('"extra_info": {}', f'"extra_info": {{"n": {DIGITS_5000}}}')),
        ),
        Case(
            f"v3: JSON nested {DEEP} deep",
            UPLOADS,
            v3([v3_record()], ('"extra_info": {}', f'"extra_info": {{"x": {nested(DEEP)}}}')),
        ),
        Case(
            "v3: JSON nested 100 deep",
            UPLOADS,
            v3([v3_record()], ('"extra_info": {}', f'"extra_info": {{"x": {nested(100)}}}')),
        ),
        Case("v3: timestamp 1e20", UPLOADS, v3([v3_record(timestamp=1e20)])),
        Case(
            "v3: timestamp 1e400",
            UPLOADS,
            v3([v3_record(timestamp=1)], ('"timestamp": 1', '"timestamp": 1e400')),
        ),
        Case(
            "v3: value 1e400",
            UPLOADS,
            v3([v3_record()], ("[1.5, 1.6]", "[1e400]")),
        ),
        Case("v3: NUL in the model name", UPLOADS, v3([v3_record(model={"name": "a\x00b"})])),
        Case(
            "v3: NUL in an extra_info key",
            UPLOADS,
            v3([v3_record(benchmark={"name": "b", "extra_info": {"k\x00": 1}})]),
        ),
        Case(
            "v3: batch_size 2^40",
            UPLOADS,
            v3([v3_record(benchmark={"name": "b", "extra_info": {"batch_size": BIG}})]),
        ),
        Case(
            "v3: runners[0].gpu_count 2^40",
            UPLOADS,
            v3([v3_record(runners=[{"name": "cuda", "gpu_count": BIG}])]),
        ),
        Case(
            "v3: benchmark a list, metric a number",
            UPLOADS,
            v3([v3_record(benchmark=[1], metric=2)]),
        ),
        Case("v3: a record that is a string", UPLOADS, v3(["record"])),
        Case(
            "v3: 100,001 JSON-lines records (results cap)",
            UPLOADS,
            upload("records.jsonl", lines.encode(), "pytorch-v3"),
        ),
        Case("v3: 100,001 values in one record", UPLOADS, v3([values])),
        Case(
            "v3: 2,000,001 empty arrays",
            UPLOADS,
            upload(
                "records.json", ("[" + ",".join(["[]"] * 2_000_001) + "]").encode(), "pytorch-v3"
            ),
        ),
    ]


def pytest_cases() -> list[Case]:
    """The pytest-benchmark parser."""
    brackets = "test_x" + "[" * 1_000_000
    return [
        Case(
            "pytest: name of 1,000,000 [ (bracket pattern)",
            UPLOADS,
            pytest_file(pytest_doc(name=brackets, fullname=f"bench.py::{brackets}")),
        ),
        Case(
            "pytest: name of 1,000 [ (under the name cap)",
            UPLOADS,
            pytest_file(pytest_doc(name="test_x" + "[" * 1000, fullname="b.py::x" + "[" * 1000)),
        ),
        Case(
            "pytest: datetime 9999-12-31T23:59:59-14:00",
            UPLOADS,
            pytest_file(pytest_doc() | {"datetime": "9999-12-31T23:59:59-14:00"}),
        ),
        Case(
            "pytest: 5,000-digit median",
            UPLOADS,
            pytest_file(pytest_doc(), ('"median": 0.001', f'"median": {DIGITS_5000}')),
        ),
        Case("pytest: stats a list", UPLOADS, pytest_file(pytest_doc(stats=[1, 2]))),
        Case(
            "pytest: cpu count 2^40",
            UPLOADS,
            pytest_file(pytest_doc() | {"machine_info": {"cpu": {"count": BIG}}}),
        ),
        Case(
            "pytest: 1,000,000 timings in data",
            UPLOADS,
            pytest_file(pytest_doc(stats={"median": 0.001, "data": [0.001] * 1_000_000})),
        ),
    ]


def gbench_cases() -> list[Case]:
    """The Google Benchmark parser."""
    repetitions = [gbench_entry(i, repetitions=100_001) for i in range(100_001)]
    return [
        Case("gbench: 100,001 repetitions of one benchmark", UPLOADS, gbench(repetitions)),
        Case("gbench: family_index a list", UPLOADS, gbench([gbench_entry(family_index=[1])])),
        Case(
            "gbench: family_index of 5,000 digits",
            UPLOADS,
            gbench([gbench_entry()], ('"family_index": 0', f'"family_index": {DIGITS_5000}')),
        ),
        Case(
            "gbench: run_name of 1,000,000 slashes",
            UPLOADS,
            gbench([gbench_entry(name="BM" + "/" * 1_000_000, run_name="BM" + "/" * 1_000_000)]),
        ),
        Case(
            "gbench: real_time 1e400",
            UPLOADS,
            gbench([gbench_entry()], ('"real_time": 1.5', '"real_time": 1e400')),
        ),
        Case("gbench: benchmarks an object", UPLOADS, gbench({"a": 1})),
        Case("gbench: an entry that is a string", UPLOADS, gbench(["BM_x"])),
    ]


def upload_cases(settings: Settings) -> list[Case]:
    """What every upload goes through: metadata, file names, the native format, the body."""
    native = json.dumps({"key": "k", "machine": {"name": "h", "device": "cpu"}, "results": []})
    return [
        Case(
            "upload: native payload that is a JSON list",
            UPLOADS,
            upload("run.json", b"[1, 2]", "native"),
        ),
        Case(
            "upload: native payload with NUL",
            UPLOADS,
            upload("run.json", native.replace('"k"', '"k\\u0000"').encode(), "native"),
        ),
        Case(
            "upload: NUL in the machine field",
            UPLOADS,
            upload(PERF_CSV, csv_file("cuda,m,8,1.5"), "torchbench-csv", machine="h\x00"),
        ),
        Case(
            "upload: raw body named by 2,000 characters",
            UPLOADS,
            {
                "content": csv_file("cuda,m,8,1.5"),
                "params": {"filename": "x" * 2000 + ".csv", "machine": "hostile-ci"},
                "headers": {"Content-Type": "text/csv"},
            },
        ),
        Case(
            "upload: file name of 100,000 characters",
            UPLOADS,
            upload("x" * 100_000 + ".csv", csv_file("cuda,m,8,1.5"), "torchbench-csv"),
        ),
        Case(
            "upload: body one byte over the limit",
            UPLOADS,
            {"content": too_big(settings), "headers": {"Content-Type": "text/csv"}},
        ),
    ]


def run_cases(settings: Settings) -> list[Case]:
    """The native ``POST /api/v1/runs``."""
    return [
        Case(
            f"runs: extra nested {DEEP} deep",
            RUNS,
            run_body(('"key"', f'"extra": {{"x": {nested(DEEP)}}}, "key"')),
        ),
        Case(
            "runs: value of 5,000 digits",
            RUNS,
            run_body(('"value": 4.2', f'"value": {DIGITS_5000}')),
        ),
        Case("runs: value 1e400", RUNS, run_body(('"value": 4.2', '"value": 1e400'))),
        Case("runs: NUL in the model name", RUNS, run_body(('"resnet50"', '"res\\u0000net50"'))),
        Case(
            "runs: batch_size 2^40",
            RUNS,
            run_body(('"value": 4.2', f'"value": 4.2, "batch_size": {BIG}')),
        ),
        Case(
            "runs: machine.gpu_count 2^40",
            RUNS,
            run_body(('"device": "cuda"', f'"device": "cuda", "gpu_count": {BIG}')),
        ),
        Case(
            "runs: started_at 9999-12-31T23:59:59-14:00",
            RUNS,
            run_body(started_at="9999-12-31T23:59:59-14:00"),
        ),
        Case("runs: started_at 1e20", RUNS, run_body(started_at=1e20)),
        Case("runs: results an object", RUNS, run_body(results={"a": [1]})),
        Case(
            "runs: body one byte over the limit",
            RUNS,
            {"content": too_big(settings), "headers": {"Content-Type": "application/json"}},
        ),
    ]


# --- running ---------------------------------------------------------------------------------


def ingest_token(database_url: str) -> str:
    """A new token with scope ``ingest`` on that database."""
    from app.core.db import Database

    database = Database(database_url)
    with database.session_scope() as session:
        _, plain = tokens_service.create_token(session, "hostile", ["ingest"], PEPPER)
    database.dispose()
    return plain


def summary(response: Any) -> str:
    """What the answer says, in one short line: the first problem and where it is."""
    if response.headers.get("content-type", "").startswith("text/html"):
        title = re.search(r"<h1[^>]*>(.*?)</h1>", response.text, re.S)
        text = re.sub(r"<[^>]+>", "", title.group(1)) if title else ""
        return "a page: " + " ".join(text.split())[:80]
    try:
        body = response.json()
    except ValueError:
        return response.text[:100]
    if not isinstance(body, dict):
        return str(body)[:100]
    if response.status_code < 300:
        return f"stored: run {body.get('id')}, {body.get('result_count')} results"
    errors = body.get("errors") or [{}]
    first = errors[0]
    where = ", ".join(
        f"{key} {first[key]}"[:40]
        for key in ("line", "record", "field", "loc")
        if first.get(key) is not None
    )
    said = first.get("message") or body.get("detail", "")
    return f"{body.get('error', '')}: {said}"[:100] + (f" [{where}]" if where else "")


def read_cases() -> list[Case]:
    """What an anonymous reader can ask of the API and the pages."""
    huge = "9" * 30
    channels = ",".join(["nightly"] * 2_000)

    def read(name: str, path: str, **params: Any) -> Case:
        return Case(name, path, {"params": params}, method="GET", anonymous=True)

    return [
        read(
            "read: compare page, one channel 2,000 times",
            "/compare",
            kind="channels",
            channels=channels,
        ),
        read(
            "read: compare page, 9 channels",
            "/compare",
            kind="channels",
            channels=",".join(f"c{n}" for n in range(9)),
        ),
        read("read: a run id of 30 digits", f"/api/v1/runs/{huge}"),
        read("read: a run page of 30 digits", f"/runs/{huge}"),
        read("read: an alert group of 30 digits", "/alerts", group=huge),
        read("read: 1,000,000 points asked for", "/api/v1/series/1/points", max_points=1_000_000),
        read("read: page 10^12 of regressions", "/api/v1/regressions", page=10**12),
        read("read: a 10,000-character cursor", "/api/v1/runs", cursor="A" * 10_000),
        read("read: a NUL in a page query", "/series", machine="a\x00b"),
        read("read: a NUL in an API query", "/api/v1/series", model="a\x00b"),
        read(
            "read: compare runs of 30 digits", "/api/v1/compare", base_run_id=huge, new_run_id=huge
        ),
        read("read: a time no calendar has", "/api/v1/runs", since="9999-12-31T23:59:59-14:00"),
        Case("login: a token of 1 MiB", "/login", {"data": {"token": "x" * 2**20}}, anonymous=True),
    ]


def send(client: TestClient, case: Case, headers: dict[str, str]) -> tuple[int, float, str]:
    """Status code, milliseconds and summary of one case."""
    request = dict(case.request)
    request["headers"] = ({} if case.anonymous else headers) | request.get("headers", {})
    began = time.perf_counter()
    response = client.request(case.method, case.path, **request)
    elapsed = (time.perf_counter() - began) * 1000
    return response.status_code, elapsed, summary(response)


def main() -> int:
    """Send every case, print the table, exit 1 on a 5xx or a slow answer."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--database-url", help="a database to migrate and use (default: SQLite)")
    parser.add_argument("--only", default="", help="only the cases whose name contains this")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        url = args.database_url or f"sqlite:///{Path(folder) / 'hostile.db'}"
        upgrade_database(url)
        settings = Settings(DATABASE_URL=url, TOKEN_PEPPER=PEPPER, BROKER_URL=None)
        headers = {"Authorization": f"Bearer {ingest_token(url)}"}
        builders: list[Callable[[], list[Case]]] = [
            csv_cases,
            v3_cases,
            pytest_cases,
            gbench_cases,
            lambda: upload_cases(settings),
            lambda: run_cases(settings),
            read_cases,
        ]
        cases = [c for build in builders for c in build() if args.only in c.name]
        application = create_app(settings)
        logging.getLogger("httpx2").setLevel(logging.WARNING)  # one line per request otherwise
        logging.getLogger("httpx").setLevel(logging.WARNING)
        failed = 0
        with TestClient(application, raise_server_exceptions=False) as client:
            print(f"{'case':<52}{'status':>7}{'ms':>8}  answer")
            for case in cases:
                status, ms, said = send(client, case, headers)
                bad = status >= 500 or ms > LIMIT_S * 1000
                failed += bad
                print(f"{case.name:<52}{status:>7}{ms:>8.0f}  {said}{'  <-- FAIL' if bad else ''}")
        application.state.database.dispose()
    print(f"\n{len(cases)} cases, {failed} over {LIMIT_S:g} s or 5xx")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
