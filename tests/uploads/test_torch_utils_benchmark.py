"""torch.utils.benchmark measurements -> native rows: the pickle and JSON that generate.py wrote,
the restricted unpickler (nothing but Measurement and TaskSpec is ever resolved), merging, the
upload API, recognition, and hostile files (caps, types, NaN)."""

import json
import pickle
import statistics
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.uploads import limits, torch_utils_benchmark
from app.uploads.base import Hints, OverLimit, Parsed, UploadError, UploadFile
from app.uploads.service import sniff
from app.uploads.torch_utils_benchmark import parse_torch_utils_benchmark
from tests.uploads.rows import assert_one_row_per_series, ingestible_run
from tests.uploads.test_api import refused_upload, upload

DATA = Path(__file__).parents[1] / "data" / "uploads" / "torch_utils_benchmark"
PICKLE = "measurements.pkl"
JSON = "measurements.json"
CPU = Hints(device="cpu")
MODULE = "torch.utils.benchmark.utils.common"


def parse(name: str, content: bytes | None = None, hints: Hints = CPU) -> Parsed:
    data = (DATA / name).read_bytes() if content is None else content
    return parse_torch_utils_benchmark(UploadFile(name, data), hints)


def refused(content: bytes, name: str = "m.json", hints: Hints = CPU) -> UploadError:
    with pytest.raises(UploadError) as caught:
        parse_torch_utils_benchmark(UploadFile(name, content), hints)
    return caught.value


def measurements() -> list[dict[str, Any]]:
    loaded: list[dict[str, Any]] = json.loads((DATA / JSON).read_text())
    return loaded


def title(spec: dict[str, Any]) -> str:
    return f"{spec['label']}: {spec['sub_label']}" if spec["sub_label"] else spec["label"]


# --- the generated files -----------------------------------------------------------------------


@pytest.mark.parametrize("name", [PICKLE, JSON])
def test_each_measurement_is_a_latency_row_with_every_run_as_a_sample(name: str) -> None:
    rows = parse(name).results
    raw = measurements()

    assert len(rows) == len(raw) == 9
    for row, measurement in zip(rows, raw, strict=True):
        spec = measurement["task_spec"]
        per_run = [t / measurement["number_per_run"] * 1000 for t in measurement["raw_times"]]
        assert row["samples"] == per_run
        assert row["value"] == statistics.median(per_run)
        assert (row["metric"], row["unit"]) == ("latency", "ms")
        assert row["model"] == title(spec)
        assert row["params"]["num_threads"] == spec["num_threads"]
        assert row["params"]["description"] == spec["description"]
        assert row["extra"]["number_per_run"] == measurement["number_per_run"]
        assert row["extra"]["stmt"] == spec["stmt"]
    assert rows[-1]["params"] == {"num_threads": 1, "description": "sum", "env": "cpu-fixture"}
    assert rows[-1]["model"] == "reduction"  # no sub_label


def test_pickle_and_json_give_the_same_rows() -> None:
    assert parse(PICKLE).results == parse(JSON).results


@pytest.mark.parametrize("name", [PICKLE, JSON])
def test_rows_are_ingestible_and_the_file_is_recognised(name: str) -> None:
    parsed = parse(name)

    run = ingestible_run(parsed)
    assert_one_row_per_series(run.results)
    assert parsed.machine == {"device": "cpu"}
    assert sniff(UploadFile(name, (DATA / name).read_bytes())) == "torch-utils-benchmark"


def test_one_task_measured_twice_is_merged_as_torch_merges() -> None:
    raw = measurements()
    twice = [raw[0], raw[0]]

    (row,) = parse(JSON, json.dumps(twice).encode()).results

    assert len(row["samples"]) == 2 * len(raw[0]["raw_times"])
    assert row["extra"]["measurements"] == 2
    assert row["value"] == statistics.median(row["samples"])


def test_a_single_measurement_object_and_its_metadata() -> None:
    one = measurements()[0] | {"metadata": {"commit": "abc", "sizes": [1, 2]}}

    (row,) = parse(JSON, json.dumps(one).encode()).results

    assert row["extra"]["metadata"] == {"commit": "abc", "sizes": [1, 2]}


def test_without_a_device_the_file_is_refused_naming_the_field() -> None:
    error = refused((DATA / PICKLE).read_bytes(), PICKLE, Hints())

    assert (error.file, error.field) == (PICKLE, "device")


# --- the restricted unpickler ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("module", "name"),
    [("os", "system"), ("builtins", "eval"), (MODULE, "Timer"), ("torch", "Tensor")],
)
def test_a_pickle_naming_anything_else_is_refused_without_importing_it(
    module: str, name: str
) -> None:
    # GLOBAL 'module name', EMPTY_TUPLE, REDUCE, STOP: a call of module.name()
    hostile = f"c{module}\n{name}\n)R.".encode()

    error = refused(hostile, "m.pkl")

    # refused by name: pickle's own find_class (which imports) would have failed otherwise
    assert f"the pickle refers to {module}.{name}, which is not read" in error.message


def test_the_allowed_classes_cannot_be_called_with_arguments() -> None:
    # GLOBAL Measurement, MARK, 'x', TUPLE, REDUCE: Measurement('x')
    hostile = f"c{MODULE}\nMeasurement\n(Vx\ntR.".encode()

    error = refused(hostile, "m.pkl")

    assert "not a pickle of torch.utils.benchmark measurements" in error.message


def test_a_pickle_over_the_cap_is_refused_before_it_is_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(limits, "MAX_PICKLE_BYTES", 100)

    error = refused((DATA / PICKLE).read_bytes(), PICKLE)

    assert isinstance(error, OverLimit)
    assert "at most 100" in error.message


def test_truncated_and_non_measurement_pickles_are_refused() -> None:
    content = (DATA / PICKLE).read_bytes()

    assert "not a pickle" in refused(content[: len(content) // 2], "m.pkl").message
    plain = refused(pickle.dumps([{"number_per_run": 1}]), "m.pkl")
    assert (plain.record, plain.field) == (0, "[0].task_spec")


def test_shared_metadata_cannot_explode() -> None:
    # 30 levels of a list holding the same list twice: 2**30 values when walked naively
    nested: list[Any] = []
    for _ in range(30):
        nested = [nested, nested]
    one = measurements()[0] | {"metadata": {"x": nested}}

    error = refused(pickle.dumps([one]), "m.pkl")

    assert isinstance(error, OverLimit)
    assert (error.record, error.field) == (0, "[0].metadata")


# --- bad values --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"raw_times": []}, "[0].raw_times"),
        ({"raw_times": [0.1, "x"]}, "[0].raw_times[1]"),
        ({"raw_times": [0.1, -1.0]}, "[0].raw_times[1]"),
        ({"number_per_run": 0}, "[0].number_per_run"),
        ({"number_per_run": True}, "[0].number_per_run"),
        ({"task_spec": None}, "[0].task_spec"),
        ({"metadata": {"x": {1, 2}}}, "[0].metadata"),
    ],
)
def test_bad_values_name_record_and_field(change: dict[str, Any], field: str) -> None:
    bad = [measurements()[0] | change]

    error = refused(pickle.dumps(bad), "m.pkl")

    assert (error.file, error.record, error.field) == ("m.pkl", 0, field)


def test_nan_times_and_unlabelled_long_statements_are_refused() -> None:
    text = (DATA / JSON).read_text().replace("0.00", "NaN, 0.00", 1)
    nan = refused(text.encode())
    assert (nan.record, nan.field) == (0, "[0].raw_times[0]")
    long = measurements()[0]
    long["task_spec"] |= {"label": None, "sub_label": None, "stmt": "x" * 300}
    unnamed = refused(json.dumps([long]).encode())
    assert unnamed.field == "[0].task_spec.label"


def test_samples_and_measurements_are_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "MAX_SAMPLES_PER_RESULT", 6)
    raw = measurements()
    merged = refused(json.dumps([raw[0], raw[0]]).encode())
    assert isinstance(merged, OverLimit)
    assert (merged.record, merged.field) == (1, "raw_times")
    monkeypatch.setattr(limits, "MAX_RESULTS_PER_FILE", 3)
    assert isinstance(refused(json.dumps(raw).encode()), OverLimit)


# --- the upload API ----------------------------------------------------------------------------


def test_the_pickle_uploads_and_reads_back(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    status, run = upload(
        client, ingest_headers, [(PICKLE, (DATA / PICKLE).read_bytes())], device="cpu"
    )

    assert status == 201, run
    assert run["extra"]["upload"]["formats"] == ["torch-utils-benchmark"]  # type: ignore[index]
    stored = client.get(f"/api/v1/runs/{run['id']}").json()["results"]
    by_case = {
        (r["model"], r["params"].get("description"), r["params"]["num_threads"]): r for r in stored
    }
    for measurement in measurements():
        spec = measurement["task_spec"]
        row = by_case[(title(spec), spec["description"], spec["num_threads"])]
        per_run = [t / measurement["number_per_run"] * 1000 for t in measurement["raw_times"]]
        assert row["value"] == pytest.approx(statistics.median(per_run))
        assert row["higher_is_better"] is False
    assert len(by_case) == len(measurements())


@pytest.mark.both_dialects
@pytest.mark.parametrize(
    ("content", "fields", "status", "where"),
    [
        ((DATA / PICKLE).read_bytes(), {}, 422, (None, None, "device")),
        (b"cos\nsystem\n)R.", {"device": "cpu"}, 422, (None, None, None)),
        (
            json.dumps([{"number_per_run": 1, "raw_times": [1e999], "task_spec": {}}]).encode(),
            {"device": "cpu"},
            422,
            (None, 0, "[0].raw_times[0]"),
        ),
        (
            json.dumps([{"number_per_run": 1, "raw_times": ["1"], "task_spec": {}}]).encode(),
            {"device": "cpu"},
            422,
            (None, 0, "[0].raw_times[0]"),
        ),
    ],
)
def test_bad_files_are_refused_through_the_api_with_file_and_place(
    client: TestClient,
    ingest_headers: dict[str, str],
    content: bytes,
    fields: dict[str, str],
    status: int,
    where: tuple[int | None, int | None, str | None],
) -> None:
    fmt = "torch-utils-benchmark"
    error = refused_upload(client, ingest_headers, "m.pkl", content, status, format=fmt, **fields)
    if where != (None, None, None):
        assert (error["line"], error["record"], error["field"]) == where


def test_recognised_names_only() -> None:
    assert torch_utils_benchmark.ALLOWED.keys() == {(MODULE, "Measurement"), (MODULE, "TaskSpec")}
