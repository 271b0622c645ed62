"""github-action-benchmark's custom JSON -> native rows: the action's own test data under both
directions, units and ranges, auto recognition by the file's name (and the 422 that names the
formats when the name does not say), the upload API, and hostile files."""

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.uploads import limits
from app.uploads.base import Hints, OverLimit, Parsed, UploadError, UploadFile
from app.uploads.github_action_benchmark import parse_custom
from app.uploads.service import sniff
from tests.uploads.rows import assert_one_row_per_series, ingestible_run
from tests.uploads.test_api import refused_upload, upload

DATA = Path(__file__).parents[1] / "data" / "uploads" / "github_action_benchmark"
BIGGER = "github-action-benchmark__customBiggerIsBetter_output.json"
SMALLER = "github-action-benchmark__customSmallerIsBetter_output.json"
SMALLER_2 = "github-action-benchmark__customSmallerIsBetter_output2.json"
DIRECTIONS = {BIGGER: True, SMALLER: False, SMALLER_2: False}
CPU = Hints(device="cpu")


def parse(name: str, content: bytes | None = None, *, higher: bool = False) -> Parsed:
    data = (DATA / name).read_bytes() if content is None else content
    return parse_custom(UploadFile(name, data), CPU, higher_is_better=higher)


def entries(name: str) -> list[dict[str, Any]]:
    loaded: list[dict[str, Any]] = json.loads((DATA / name).read_text())
    return loaded


def refused(content: Any, hints: Hints = CPU) -> UploadError:
    data = content if isinstance(content, bytes) else json.dumps(content).encode()
    with pytest.raises(UploadError) as caught:
        parse_custom(UploadFile("bench.json", data), hints, higher_is_better=False)
    return caught.value


# --- the action's own test data ----------------------------------------------------------------


@pytest.mark.parametrize("name", list(DIRECTIONS))
def test_each_entry_is_one_row_with_the_formats_direction(name: str) -> None:
    rows = parse(name, higher=DIRECTIONS[name]).results

    assert len(rows) == len(entries(name))
    for row, entry in zip(rows, entries(name), strict=True):
        assert (row["model"], row["value"]) == (entry["name"], entry["value"])
        assert row["suite"] == "github-action-benchmark"
        direction = "bigger" if DIRECTIONS[name] else "smaller"
        assert row["metric"].startswith(f"{direction}_is_better:")
        assert row["higher_is_better"] is DIRECTIONS[name]


def test_units_benchwatch_knows_and_ones_it_keeps_in_extra() -> None:
    bigger = {r["model"]: r for r in parse(BIGGER, higher=True).results}
    smaller = {r["model"]: r for r in parse(SMALLER).results}

    assert bigger["My Custom Bigger Is Better Benchmark - Throughput"]["unit"] == "req/s"
    assert bigger["My Custom Bigger Is Better Benchmark - Free Memory"]["unit"] == "MB"
    cpu = smaller["My Custom Smaller Is Better Benchmark - CPU Load"]
    assert cpu["unit"] == "%"
    assert {(r["unit"], r["metric"]) for r in parse(SMALLER_2).results} == {
        ("ns", "smaller_is_better:time")
    }
    assert cpu["metric"] == "smaller_is_better:percent"
    free = bigger["My Custom Bigger Is Better Benchmark - Free Memory"]
    assert free["metric"] == "bigger_is_better:bytes"
    odd = parse("x.json", b'[{"name": "a", "unit": "frobs", "value": 3}]').results[0]
    assert (odd["unit"], odd["metric"], odd["extra"]) == (
        "",
        "smaller_is_better:frobs",
        {"unit": "frobs"},
    )


def test_range_and_extra_are_kept_with_the_spread_as_a_number() -> None:
    smaller = {r["model"]: r for r in parse(SMALLER).results}
    cpu = smaller["My Custom Smaller Is Better Benchmark - CPU Load"]
    entry = entries(SMALLER)[0]

    assert cpu["extra"] == {
        "range": entry["range"],  # "5%" of 50
        "extra": entry["extra"],
        "range_value": 2.5,
    }
    numeric = {r["model"]: r for r in parse(SMALLER_2).results}
    assert numeric["No instrumentation"]["extra"]["range_value"] == entries(SMALLER_2)[0]["range"]
    assert "extra" not in smaller["My Custom Smaller Is Better Benchmark - Memory Used"]


@pytest.mark.parametrize(
    ("written", "spread"),
    [("± 3.2%", 3.2), ("+/- 0.5", 0.5), ("+- 7", 7.0), ("stddev: 0.04", 0.04), ("about 3", None)],
)
def test_ranges_as_the_actions_extractors_write_them(written: str, spread: float | None) -> None:
    content = json.dumps([{"name": "a", "unit": "ms", "value": 100, "range": written}])

    (row,) = parse("x.json", content.encode()).results

    assert row["extra"]["range"] == written
    assert row["extra"].get("range_value") == (spread and pytest.approx(spread))


@pytest.mark.parametrize("name", list(DIRECTIONS))
def test_rows_are_ingestible(name: str) -> None:
    parsed = parse(name, higher=DIRECTIONS[name])

    run = ingestible_run(parsed)
    assert_one_row_per_series(run.results)
    assert parsed.machine == {"device": "cpu"}


# --- recognition -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        (BIGGER, "custom-bigger-is-better"),
        (SMALLER, "custom-smaller-is-better"),
        ("latency-smaller-is-better.json", "custom-smaller-is-better"),
        ("throughput_bigger_is_better.json", "custom-bigger-is-better"),
        ("bench.json", "github-action-benchmark"),
    ],
)
def test_auto_takes_the_direction_from_the_files_name(name: str, fmt: str) -> None:
    assert sniff(UploadFile(name, (DATA / SMALLER).read_bytes())) == fmt


def test_a_value_written_as_a_string_is_read_as_zod_coerces_it() -> None:
    content = b'[{"name": 7, "unit": "ms", "value": "43.0", "range": 2, "extra": 1.5}]'

    (row,) = parse("x.json", content).results

    assert (row["model"], row["value"], row["extra"]["range"], row["extra"]["extra"]) == (
        "7",
        43.0,
        "2",
        "1.5",
    )


# --- hostile and malformed files ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ({"unit": "ms", "value": 1}, "[0].name"),
        ({"name": "a", "value": 1}, "[0].unit"),
        ({"name": "a", "unit": "ms"}, "[0].value"),
        ({"name": "a", "unit": "ms", "value": "fast"}, "[0].value"),
        ({"name": "a", "unit": "ms", "value": True}, "[0].value"),
        ({"name": "a", "unit": "ms", "value": [1]}, "[0].value"),
        ({"name": "a", "unit": "ms", "value": "nan"}, "[0].value"),
        ({"name": "a", "unit": "ms", "value": 1, "range": {"x": 1}}, "[0].range"),
        ({"name": "", "unit": "ms", "value": 1}, "[0].name"),
        ({"name": "a", "unit": "u" * 65, "value": 1}, "[0].unit"),
    ],
)
def test_bad_entries_name_record_and_field(entry: dict[str, Any], field: str) -> None:
    error = refused([entry])

    assert (error.file, error.record, error.field) == ("bench.json", 0, field)


def test_nan_literals_duplicates_and_shapes() -> None:
    nan = refused(b'[{"name": "a", "unit": "ms", "value": NaN}]')
    assert (nan.record, nan.field) == (0, "[0].value")
    twice = refused(
        [{"name": "a", "unit": "ms", "value": 1}, {"name": "a", "unit": "ms", "value": 2}]
    )
    assert (twice.record, twice.field) == (1, "[1].name")
    assert refused({"name": "a"}).record is None
    assert refused([3]).field == "[0]"


def test_caps_entries_and_names(monkeypatch: pytest.MonkeyPatch) -> None:
    long = refused([{"name": "n" * (limits.MAX_NAME_CHARS + 1), "unit": "ms", "value": 1}])
    assert isinstance(long, OverLimit)
    assert long.field == "[0].name"
    monkeypatch.setattr(limits, "MAX_RESULTS_PER_FILE", 2)
    many = refused([{"name": f"n{i}", "unit": "ms", "value": 1} for i in range(3)])
    assert isinstance(many, OverLimit)


# --- the upload API ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", [BIGGER, SMALLER_2])
def test_the_actions_files_upload_with_auto_and_read_back(
    client: TestClient, ingest_headers: dict[str, str], name: str
) -> None:
    status, run = upload(client, ingest_headers, [(name, (DATA / name).read_bytes())], device="cpu")

    assert status == 201, run
    stored = {r["model"]: r for r in client.get(f"/api/v1/runs/{run['id']}").json()["results"]}
    for entry in entries(name):
        assert stored[entry["name"]]["value"] == pytest.approx(entry["value"])
        assert stored[entry["name"]]["higher_is_better"] is DIRECTIONS[name]


@pytest.mark.both_dialects
def test_under_auto_a_file_without_a_direction_is_a_422_naming_the_formats(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    status, body = upload(
        client, ingest_headers, [("bench.json", (DATA / SMALLER).read_bytes())], device="cpu"
    )

    assert status == 422, body
    (error,) = body["errors"]  # type: ignore[misc]
    assert (error["file"], error["field"]) == ("bench.json", "format")
    assert "custom-smaller-is-better" in error["message"]
    assert "custom-bigger-is-better" in error["message"]
    named, run = upload(
        client,
        ingest_headers,
        [("bench.json", (DATA / SMALLER).read_bytes())],
        device="cpu",
        format="custom-bigger-is-better",
    )
    assert named == 201, run
    assert {
        r["higher_is_better"] for r in client.get(f"/api/v1/runs/{run['id']}").json()["results"]
    } == {True}


@pytest.mark.both_dialects
@pytest.mark.parametrize(
    ("content", "fields", "status", "where"),
    [
        ((DATA / SMALLER).read_bytes(), {}, 422, (None, "device")),
        (
            b'[{"name": "a", "unit": "ms", "value": Infinity}]',
            {"device": "cpu"},
            422,
            (0, "[0].value"),
        ),
        (b'[{"name": "a", "unit": "ms", "value": "x"}]', {"device": "cpu"}, 422, (0, "[0].value")),
        (
            json.dumps([{"name": "n" * 2000, "unit": "ms", "value": 1}]).encode(),
            {"device": "cpu"},
            413,
            (0, "[0].name"),
        ),
        (b'[{"name": "a", "unit": "ms", "value": -1}]', {"device": "cpu"}, 422, (None, None)),
    ],
)
def test_bad_files_are_refused_through_the_api_with_file_and_place(
    client: TestClient,
    ingest_headers: dict[str, str],
    content: bytes,
    fields: dict[str, str],
    status: int,
    where: tuple[int | None, str | None],
) -> None:
    fmt = "custom-smaller-is-better"
    error = refused_upload(client, ingest_headers, "b.json", content, status, format=fmt, **fields)
    if where != (None, None):
        assert (error["record"], error["field"]) == where
