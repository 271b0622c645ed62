"""tritonbench CSV and JSON -> native rows: real outputs of tritonbench's run.py, the nightly
wrapper, failures, the upload API, recognition, and hostile files (caps, types, NaN)."""

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.uploads import limits
from app.uploads.base import Hints, OverLimit, Parsed, UploadError, UploadFile
from app.uploads.tritonbench import METRICS, parse_tritonbench
from tests.uploads.rows import assert_ingestible_and_recognised
from tests.uploads.test_api import refused_upload, upload

DATA = Path(__file__).parents[1] / "data" / "uploads" / "tritonbench"
CSV = "layer_norm.csv"
JSON = "layer_norm.json"
FWD_BWD_CSV = "layer_norm_fwd_bwd.csv"
FWD_BWD_JSON = "layer_norm_fwd_bwd.json"
ALL_FILES = [CSV, JSON, FWD_BWD_CSV, FWD_BWD_JSON]
CPU = Hints(device="cpu")


def parse(name: str, content: bytes | None = None, hints: Hints = CPU) -> Parsed:
    data = (DATA / name).read_bytes() if content is None else content
    return parse_tritonbench(UploadFile(name, data), hints)


def refused(name: str, content: str | bytes, hints: Hints = CPU) -> UploadError:
    data = content.encode() if isinstance(content, str) else content
    with pytest.raises(UploadError) as caught:
        parse_tritonbench(UploadFile(name, data), hints)
    return caught.value


def keyed(parsed: Parsed) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Rows by (backend, input, metric)."""
    return {(r["config"], r["params"]["input"], r["metric"]): r for r in parsed.results}


def csv_cells(name: str) -> list[tuple[str, str, str, float]]:
    """(backend, input, tritonbench metric, value) of every filled cell of the file's inputs."""
    with (DATA / name).open(newline="") as handle:
        header, *rows = list(csv.reader(handle, delimiter=";"))
    return [
        (*column.split("-", 1)[:1], row[0], column.split("-", 1)[1], float(cell))
        for row in rows
        if row[0] != "average"
        for column, cell in zip(header[1:], row[1:], strict=True)
        if cell
    ]


# --- real files ------------------------------------------------------------------------------


def test_the_csv_gives_one_row_per_filled_cell_with_benchwatch_names_and_units() -> None:
    rows = keyed(parse(CSV))

    cells = csv_cells(CSV)
    assert len(rows) == len(cells) == 12  # the "average" row is not a case
    for backend, x_val, metric, value in cells:
        row = rows[(backend, x_val, METRICS[metric].name)]
        assert row["value"] == value
        assert (row["unit"], row["higher_is_better"]) == (
            METRICS[metric].unit,
            METRICS[metric].higher_is_better,
        )
        assert (row["suite"], row["model"], row["mode"]) == (
            "tritonbench",
            "layer_norm",
            "inference",
        )
        assert row["params"] == {"input": x_val, "op_mode": "fwd"}
    latency = rows[("torch_layer_norm", "1024", "latency")]
    assert (latency["unit"], latency["higher_is_better"]) == ("ms", False)
    assert rows[("torch_compile_layer_norm", "1536", "gbps")]["unit"] == "GB/s"


def test_the_json_of_the_same_run_gives_the_same_rows() -> None:
    document = json.loads((DATA / JSON).read_text())
    from_json = keyed(parse(JSON))

    assert from_json == keyed(parse(CSV))
    key = "tritonbench_layer_norm_fwd[x_1024-torch_layer_norm]_latency"
    assert from_json[("torch_layer_norm", "1024", "latency")]["value"] == float(document[key])
    aggregates = parse(JSON).run["extra"]["tritonbench"]["aggregates"]
    assert aggregates == {
        k.removeprefix("tritonbench_"): v for k, v in document.items() if k.endswith("-avg")
    }


@pytest.mark.parametrize("name", [FWD_BWD_CSV, FWD_BWD_JSON])
def test_a_backward_run_is_training_and_keeps_its_mode(name: str) -> None:
    rows = keyed(parse(name))

    assert {r["mode"] for r in rows.values()} == {"training"}
    assert {r["params"]["op_mode"] for r in rows.values()} == {"fwd_bwd"}
    assert {r["model"] for r in rows.values()} == {"layer_norm"}
    speedup = csv_cells(FWD_BWD_CSV)[-1]
    assert rows[("torch_compile_layer_norm", "1024", "speedup")]["value"] == speedup[3]


@pytest.mark.parametrize("name", ALL_FILES)
def test_rows_are_ingestible_and_the_file_is_recognised(name: str) -> None:
    file = UploadFile(name, (DATA / name).read_bytes())
    assert_ingestible_and_recognised(parse(name), file, "cpu", "tritonbench")


def test_the_operator_comes_from_write_csvs_temporary_name() -> None:
    content = (DATA / CSV).read_bytes()

    assert {r["model"] for r in parse("op_layer_norm_k2j3x_9a.csv", content).results} == {
        "layer_norm"
    }


# --- what the files leave to the upload --------------------------------------------------------


def test_the_nightly_result_gives_the_device_and_keeps_env() -> None:
    nightly = {
        "name": "nightly",
        "env": {"device": "NVIDIA H100 80GB HBM3", "cuda_version": "12.8"},
        "metrics": json.loads((DATA / JSON).read_text()),
    }
    parsed = parse("result.json", json.dumps(nightly).encode(), Hints())

    assert parsed.machine == {"device": "cuda", "arch": "NVIDIA H100 80GB HBM3"}
    assert parsed.run["extra"]["tritonbench"]["env"]["cuda_version"] == "12.8"
    assert keyed(parsed) == keyed(parse(JSON))


def test_without_a_device_the_file_is_refused_naming_the_field() -> None:
    error = refused(CSV, (DATA / CSV).read_bytes(), Hints())

    assert (error.file, error.field) == (CSV, "device")
    assert "give device=" in error.message


def test_an_error_message_in_place_of_a_number_is_a_failed_row() -> None:
    text = "(M, N);triton-latency;triton-tflops\n(8, 8);CUDA out of memory;\n(16, 16);0.5;2.0\n"
    rows = keyed(parse("softmax.csv", text.encode()))

    failed = rows[("triton", "(8, 8)", "latency")]
    assert (failed["status"], failed["reason"]) == ("failed", "CUDA out of memory")
    assert ("triton", "(8, 8)", "tflops") not in rows
    assert rows[("triton", "(16, 16)", "tflops")]["value"] == 2.0


def test_input_metrics_and_unknown_metrics_go_to_extra() -> None:
    text = (
        "x_val;hw_roofline;triton-latency;triton-occupancy;triton-best_config\n4;0.9;1.5;0.7;{}\n"
    )
    (row,) = parse("rope.csv", text.encode()).results

    assert row["metric"] == "latency"
    assert row["extra"] == {
        "metrics": {"occupancy": "0.7", "best_config": "{}"},
        "input": {"hw_roofline": "0.9"},
    }


# --- hostile and malformed files ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "line", "field", "words"),
    [
        ("x_val;t-latency\n1;nan\n", 2, "t-latency", "not a finite number"),
        ("x_val;t-latency\n1;1e400\n", 2, "t-latency", "overflows to infinity"),
        ("x_val;t-latency\n1;1.0\n1;2.0\n", 3, "t-latency", "appears twice"),
        ("x_val;t(1)-latency\n1;1.0\n", 2, "t(1)-latency", "no config name"),
        ("x_val;t-latency;t-latency\n1;1;1\n", 1, "t-latency", "appears twice"),
        ("x_val;t-latency\n1;1;2;3\n", 2, None, "cells"),
        ("x_val,t-latency\n1,2\n", 1, None, "header"),
    ],
)
def test_bad_csv_cells_name_line_and_field(
    content: str, line: int, field: str | None, words: str
) -> None:
    error = refused("gemm.csv", content)

    assert (error.file, error.line, error.field) == ("gemm.csv", line, field)
    assert words in error.message


@pytest.mark.parametrize(
    ("metrics", "field", "words"),
    [
        (
            {"tritonbench_gemm_fwd[x_1-t]_latency": [1.0]},
            "tritonbench_gemm_fwd[x_1-t]_latency",
            "a number",
        ),
        (
            {"tritonbench_gemm_fwd[x_1-t]_latency": True},
            "tritonbench_gemm_fwd[x_1-t]_latency",
            "a number",
        ),
        ({"gemm_fwd[x_1-t]_latency": 1.0}, "gemm_fwd[x_1-t]_latency", "not a tritonbench metric"),
        ({"tritonbench_gemm_fwd_latency": 1.0}, "tritonbench_gemm_fwd_latency", "expected"),
    ],
)
def test_bad_json_metrics_name_the_key(metrics: dict[str, Any], field: str, words: str) -> None:
    error = refused("gemm.json", json.dumps(metrics))

    assert (error.file, error.field) == ("gemm.json", field)
    assert words in error.message


def test_a_nan_literal_is_refused_at_its_key() -> None:
    error = refused("gemm.json", '{"tritonbench_gemm_fwd[x_1-t]_tflops": NaN}')

    assert error.field == "tritonbench_gemm_fwd[x_1-t]_tflops"
    assert "not a finite number" in error.message


def test_caps_rows_cells_and_names(monkeypatch: pytest.MonkeyPatch) -> None:
    long_cell = refused("gemm.csv", f"x_val;t-latency\n1;{'1' * limits.MAX_CELL_CHARS}5\n")
    assert isinstance(long_cell, OverLimit)
    assert (long_cell.line, long_cell.field) == (2, "t-latency")
    long_key = refused("g.json", json.dumps({"tritonbench_" + "x" * limits.MAX_NAME_CHARS: 1}))
    assert isinstance(long_key, OverLimit)
    monkeypatch.setattr(limits, "MAX_RESULTS_PER_FILE", 3)
    rows = refused("gemm.csv", "x_val;t-latency\n" + "".join(f"{i};1.0\n" for i in range(4)))
    assert isinstance(rows, OverLimit)
    assert "more than 3 rows" in rows.message
    keys = {f"tritonbench_gemm_fwd[x_{i}-t]_latency": 1.0 for i in range(4)}
    assert isinstance(refused("g.json", json.dumps(keys)), OverLimit)


# --- the upload API ----------------------------------------------------------------------------


def test_a_real_csv_uploads_and_reads_back(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    status, run = upload(client, ingest_headers, [(CSV, (DATA / CSV).read_bytes())], device="cpu")

    assert status == 201, run
    assert run["extra"]["upload"]["formats"] == ["tritonbench"]  # type: ignore[index]
    stored = client.get(f"/api/v1/runs/{run['id']}").json()["results"]
    got = {(r["config"], r["params"]["input"], r["metric"]): r for r in stored}
    for backend, x_val, metric, value in csv_cells(CSV):
        row = got[(backend, x_val, METRICS[metric].name)]
        assert row["value"] == pytest.approx(value)
        assert row["higher_is_better"] is METRICS[metric].higher_is_better
    assert len(got) == len(csv_cells(CSV))


@pytest.mark.both_dialects
@pytest.mark.parametrize(
    ("name", "content", "fields", "status", "where"),
    [
        (CSV, (DATA / CSV).read_bytes(), {}, 422, (None, "device")),
        ("g.csv", b"x_val;t-latency\n1;inf\n", {"device": "cpu"}, 422, (2, "t-latency")),
        (
            "g.csv",
            f"x_val;t-latency\n1;{'1' * 5000}\n".encode(),
            {"device": "cpu"},
            413,
            (2, "t-latency"),
        ),
        (
            "g.json",
            b'{"tritonbench_g_fwd[x_1-t]_latency": {"a": 1}}',
            {"device": "cpu"},
            422,
            (None, "tritonbench_g_fwd[x_1-t]_latency"),
        ),
    ],
)
def test_bad_files_are_refused_through_the_api_with_file_and_place(
    client: TestClient,
    ingest_headers: dict[str, str],
    name: str,
    content: bytes,
    fields: dict[str, str],
    status: int,
    where: tuple[int | None, str],
) -> None:
    error = refused_upload(
        client, ingest_headers, name, content, status, format="tritonbench", **fields
    )
    assert (error["line"], error["field"]) == where
