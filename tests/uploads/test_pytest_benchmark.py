"""pytest-benchmark JSON -> native rows: real files, identity rules, errors with their place."""

import copy
import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from app.runs.schemas import ResultIn
from app.uploads import limits
from app.uploads.base import Hints, Parsed, UploadError, UploadFile
from app.uploads.pytest_benchmark import parse_pytest_benchmark
from tests.uploads.rows import assert_one_row_per_series, ingestible_run

DATA = Path(__file__).parents[1] / "data" / "uploads" / "pytest_benchmark"
RUSTYBT = "rustybt__0002_decimal_backtest.json"
SAVE_DATA = "rustybt__decimal_backtest_save_data_subset.json"
TORCHMATCH = "torchmatch__cu128_20260726T192146Z_subset.json"
MILLIPYDE = "millipyde__nvidia_opencv_cuda_subset.json"
ALL_FILES = [RUSTYBT, SAVE_DATA, TORCHMATCH, MILLIPYDE]


def parse(name: str, hints: Hints | None = None) -> Parsed:
    path = DATA / name
    return parse_pytest_benchmark(UploadFile(name, path.read_bytes()), hints or Hints())


def document(name: str = RUSTYBT) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((DATA / name).read_text())
    return loaded


def parse_document(doc: dict[str, Any], hints: Hints | None = None) -> Parsed:
    return parse_pytest_benchmark(
        UploadFile("doc.json", json.dumps(doc).encode()), hints or Hints()
    )


def upload_error(doc: dict[str, Any] | bytes) -> UploadError:
    content = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    with pytest.raises(UploadError) as caught:
        parse_pytest_benchmark(UploadFile("bad.json", content), Hints())
    return caught.value


def rows_by(parsed: Parsed, model: str, metric: str) -> dict[str, Any]:
    (row,) = [r for r in parsed.results if r["model"] == model and r["metric"] == metric]
    return row


# --- real files -------------------------------------------------------------------------


def test_rustybt_rows_machine_environment_run() -> None:
    parsed = parse(RUSTYBT)

    assert len(parsed.results) == 8  # 4 benchmarks x (latency, ops)
    latency = rows_by(parsed, "test_decimal_portfolio_value_100_positions", "latency")
    assert latency["suite"] == "portfolio"
    assert latency["unit"] == "ms"  # seconds converted to the well-known metric's unit
    assert latency["value"] == 1.2958000297658145e-05 * 1000  # stats.median
    assert latency["params"] == {}
    assert "samples" not in latency  # no --benchmark-save-data
    assert (latency["mode"], latency["precision"], latency["config"]) == (
        "inference",
        "fp32",
        "eager",
    )
    assert latency["extra"]["stats"]["rounds"] == 14761
    assert latency["extra"]["stats"]["mean"] == 1.3498528285900489e-05  # as written: seconds
    assert latency["extra"]["stats"]["median"] == 1.2958000297658145e-05
    assert latency["extra"]["options"]["timer"] == "perf_counter"
    ops = rows_by(parsed, "test_decimal_portfolio_value_100_positions", "ops")
    assert (ops["unit"], ops["value"]) == ("ops/s", 74082.15020333158)
    assert {r["suite"] for r in parsed.results} == {"portfolio", "metrics", "data"}

    assert parsed.machine == {
        "device": "cpu",
        "cpu": "Apple M2 Pro",
        "cpu_count": 10,
        "hostname": "Mac",
        "extra": {
            "system": "Darwin",
            "release": "25.0.0",
            "machine": "arm64",
            "processor": "arm",
            "cpu_arch": "ARM_8",
        },
    }
    assert parsed.environment["python"] == "3.12.0"
    assert parsed.environment["packages"] == {"pytest-benchmark": "5.1.0"}
    assert parsed.run["commit"] == "e69aaebab58e1e8da9d4e35a06297e9f3195f067"
    assert parsed.run["branch"] == "main"
    assert parsed.run["started_at"] == "2025-10-01T12:04:46.581174+00:00"
    assert parsed.run["extra"]["dirty"] is True
    assert parsed.run["extra"]["project"] == "rustybt"


def test_saved_data_become_samples() -> None:
    raw = {b["name"]: b["stats"] for b in document(SAVE_DATA)["benchmarks"]}
    parsed = parse(SAVE_DATA)

    sharpe = rows_by(parsed, "test_decimal_sharpe_ratio", "latency")
    assert len(sharpe["samples"]) == 710
    assert sharpe["samples"] == [s * 1000 for s in raw["test_decimal_sharpe_ratio"]["data"]]
    assert sharpe["value"] == 0.00037799999972776277 * 1000
    assert statistics.median(sharpe["samples"]) == pytest.approx(sharpe["value"])
    aggregation = rows_by(parsed, "test_decimal_data_aggregation", "latency")
    assert len(aggregation["samples"]) == 8
    assert "samples" not in rows_by(parsed, "test_decimal_data_aggregation", "ops")


def test_torchmatch_params_and_groups() -> None:
    parsed = parse(TORCHMATCH)

    assert len(parsed.results) == 28
    assert {r["suite"] for r in parsed.results} == {
        "single-cpu",
        "single-cuda",
        "batch-cpu",
        "batch-cuda",
        "transport-matrix-cpu",
        "transport-matrix-cuda",
        "transport-samples-cuda",
    }
    first = parsed.results[0]
    assert first["model"] == "test_single_cpu"  # the [param id] is not in the model
    assert first["params"] == {
        "dist": "uniform",
        "dtype": "UNSERIALIZABLE[torch.float32]",
        "n": 16,
        "op_name": "jonker_scalar",
    }
    assert first["value"] == pytest.approx(6.040965672582388e-03)
    # No commit_info: the run has only its start time; no node: no hostname.
    assert parsed.run == {"started_at": "2026-07-26T19:32:13.276211+00:00"}
    assert "hostname" not in parsed.machine
    assert parsed.machine["cpu"] == "AMD Ryzen 9 5900HX with Radeon Graphics"
    assert parsed.machine["cpu_count"] == 16


def test_millipyde_zone_less_datetime_extra_info_and_gpu() -> None:
    parsed = parse(MILLIPYDE)

    assert parsed.run["started_at"] == "2023-04-01T16:36:05.502821+00:00"  # utcnow() in 4.0
    assert parsed.run["extra"]["dirty"] is False
    assert parsed.run["branch"] == "pytest-benchmark"
    first = parsed.results[0]
    assert first["suite"] == "opencv_cuda"
    assert first["model"] == "benchmark_adjust_gamma_2_gain_1"
    assert first["params"] == {"rounds": 100, "warmup_rounds": 25, "input_size": 500}
    assert first["extra"]["extra_info"]["input_info"]["width"] == 500
    assert first["extra"]["options"]["disable_gc"] is True
    assert parsed.machine["extra"]["gpu"]["name"] == "UNSERIALIZABLE[b'NVIDIA GeForce RTX 3070']"
    assert parsed.environment["packages"] == {"pytest-benchmark": "4.0.0"}


@pytest.mark.parametrize("name", ALL_FILES)
def test_rows_machine_environment_and_run_are_ingestible(name: str) -> None:
    parsed = parse(name)

    run = ingestible_run(parsed)
    assert len(run.results) == len(parsed.results) == 2 * len(document(name)["benchmarks"])
    assert run.started_at is not None
    assert run.started_at.tzinfo is not None
    assert_one_row_per_series(run.results)


def test_hints_win() -> None:
    hints = Hints(
        suite="decimal", config="inductor", precision="bf16", mode="training", device="mps"
    )
    parsed = parse(RUSTYBT, hints)

    assert {r["suite"] for r in parsed.results} == {"decimal"}
    assert {(r["mode"], r["precision"], r["config"]) for r in parsed.results} == {
        ("training", "bf16", "inductor")
    }
    assert parsed.machine["device"] == "mps"


# --- identity ---------------------------------------------------------------------------


def test_suite_falls_back_to_the_module_and_classes_stay_in_the_model() -> None:
    doc = document()
    entry = doc["benchmarks"][0]
    entry["group"] = None
    entry["fullname"] = "benchmarks/bench_io.py::TestRead::test_read[small]"
    entry["name"] = "test_read[small]"
    entry["params"] = None
    doc["benchmarks"] = [entry]

    (latency, _ops) = parse_document(doc).results

    assert latency["suite"] == "bench_io"
    assert latency["model"] == "TestRead::test_read"
    assert latency["params"] == {"id": "small"}  # no params recorded: the id keeps them apart


def test_same_test_name_in_two_modules_of_one_group_uses_node_ids() -> None:
    doc = document()
    first, second = copy.deepcopy(doc["benchmarks"][0]), copy.deepcopy(doc["benchmarks"][0])
    first["fullname"] = "benchmarks/a.py::test_decimal_portfolio_value_100_positions"
    second["fullname"] = "benchmarks/b.py::test_decimal_portfolio_value_100_positions"
    doc["benchmarks"] = [first, second, doc["benchmarks"][1]]

    models = [r["model"] for r in parse_document(doc).results if r["metric"] == "latency"]

    assert models == [
        "benchmarks/a.py::test_decimal_portfolio_value_100_positions",
        "benchmarks/b.py::test_decimal_portfolio_value_100_positions",
        "test_decimal_portfolio_value_scalability",  # unique: keeps its short name
    ]


def test_the_same_benchmark_twice_is_refused() -> None:
    doc = document()
    doc["benchmarks"].append(copy.deepcopy(doc["benchmarks"][0]))

    error = upload_error(doc)

    assert (error.record, error.field) == (4, "benchmarks[4].fullname")
    assert "benchmarks[0]" in error.message


def test_memory_addresses_are_dropped_from_params() -> None:
    doc = document()
    doc["benchmarks"][0]["params"] = {
        "fn": "UNSERIALIZABLE[<function relu at 0x7f3a2c1d9e50>]",
        "sizes": [1, 2],
    }

    row = parse_document(doc).results[0]

    assert row["params"] == {"fn": "UNSERIALIZABLE[<function relu>]", "sizes": [1, 2]}


def test_too_many_samples_are_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "MAX_SAMPLES_PER_RESULT", 100)
    row = rows_by(parse(SAVE_DATA), "test_decimal_sharpe_ratio", "latency")

    assert "samples" not in row
    assert row["extra"]["samples_omitted"] == 710
    assert row["value"] == pytest.approx(0.37799999972776277)


def test_nan_in_extra_info_becomes_text() -> None:
    doc = document()
    doc["benchmarks"][0]["extra_info"] = {"loss": float("nan")}

    row = parse_document(doc).results[0]

    assert row["extra"]["extra_info"] == {"loss": "nan"}
    ResultIn.model_validate(row)


# --- errors -----------------------------------------------------------------------------


def test_invalid_json_names_the_line() -> None:
    error = upload_error(b'{\n  "benchmarks": [\n    {"name": "x",}\n  ]\n}')

    assert error.line == 3
    assert error.file == "bad.json"
    assert "invalid JSON" in error.message


@pytest.mark.parametrize(
    ("content", "field"),
    [
        (b"[]", None),
        (b'{"machine_info": {}}', "benchmarks"),
        (b'{"benchmarks": {"name": "x"}}', "benchmarks"),
    ],
)
def test_not_a_pytest_benchmark_document(content: bytes, field: str | None) -> None:
    error = upload_error(content)

    assert (error.record, error.field) == (None, field)


def _broken(path: str, value: Any, index: int = 2) -> dict[str, Any]:
    """The rustybt file with one field of benchmarks[index] set (None: removed)."""
    doc = document()
    *parents, last = path.split(".")
    target = doc["benchmarks"][index]
    for part in parents:
        target = target[part]
    if value is None:
        del target[last]
    else:
        target[last] = value
    return doc


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        ("stats.median", None, "benchmarks[2].stats.median"),
        ("stats.median", "fast", "benchmarks[2].stats.median"),
        ("stats.median", -1.0, "benchmarks[2].stats.median"),
        ("stats.median", True, "benchmarks[2].stats.median"),
        ("stats.mean", [0.1], "benchmarks[2].stats.mean"),
        ("stats.ops", float("inf"), "benchmarks[2].stats.ops"),
        ("stats.rounds", 7.5, "benchmarks[2].stats.rounds"),
        ("stats", None, "benchmarks[2].stats"),
        ("stats", [1, 2], "benchmarks[2].stats"),
        ("name", None, "benchmarks[2].name"),
        ("name", 42, "benchmarks[2].name"),
        ("stats.data", {"a": 1}, "benchmarks[2].stats.data"),
        ("stats.data", [0.1, 0.2, "slow"], "benchmarks[2].stats.data[2]"),
    ],
)
def test_bad_benchmark_names_record_and_field(path: str, value: Any, field: str) -> None:
    error = upload_error(_broken(path, value))

    assert error.record == 2
    assert error.field == field
    assert str(error).startswith("bad.json, record 2, field ")


def test_non_finite_median_from_a_nan_literal() -> None:
    text = json.dumps(document()).replace("1.2958000297658145e-05", "NaN", 1)

    error = upload_error(text.encode())

    assert (error.record, error.field) == (0, "benchmarks[0].stats.median")


def test_a_benchmark_that_is_not_an_object() -> None:
    doc = document()
    doc["benchmarks"][1] = "test_x"

    error = upload_error(doc)

    assert (error.record, error.field) == (1, "benchmarks[1]")
