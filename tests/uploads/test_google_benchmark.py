"""Google Benchmark JSON -> native rows: real files, repetitions and aggregates, errors."""

import copy
import json
import statistics
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from app.runs.schemas import ResultIn
from app.uploads.base import Hints, Parsed, UploadError, UploadFile
from app.uploads.google_benchmark import parse_google_benchmark, split_run_name
from tests.uploads.rows import assert_one_row_per_series, ingestible_run

DATA = Path(__file__).parents[1] / "data" / "uploads" / "google_benchmark"
BPFILTER = "bpfilter__fd8dc28.json"
KOKKOS = "kokkos__Kokkos_PerformanceTest_MDRangePolicy_Stream_2026-05-05_T23-02-37.json"
OLD = "github-action-benchmark__googlecpp_output.json"
REPEATED = "repetitions_aggregates.json"  # made with google-benchmark 1.9.5, see README
ALL_FILES = [BPFILTER, KOKKOS, OLD, REPEATED]


def parse(name: str, hints: Hints | None = None) -> Parsed:
    path = DATA / name
    return parse_google_benchmark(UploadFile(name, path.read_bytes()), hints or Hints())


def document(name: str = REPEATED) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((DATA / name).read_text())
    return loaded


def parse_document(doc: dict[str, Any]) -> Parsed:
    return parse_google_benchmark(UploadFile("doc.json", json.dumps(doc).encode()), Hints())


def upload_error(doc: dict[str, Any] | bytes) -> UploadError:
    content = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    with pytest.raises(UploadError) as caught:
        parse_google_benchmark(UploadFile("bad.json", content), Hints())
    return caught.value


def row(parsed: Parsed, model: str, params: dict[str, str], metric: str) -> dict[str, Any]:
    (found,) = [
        r
        for r in parsed.results
        if r["model"] == model and r["params"] == params and r["metric"] == metric
    ]
    return found


def raw_entries(doc: dict[str, Any], run_name: str) -> dict[str, dict[str, Any]]:
    """The iteration rows (by repetition index) and aggregate rows (by name) of one run_name."""
    entries = [b for b in doc["benchmarks"] if b["run_name"] == run_name]
    return {
        str(b.get("aggregate_name", b.get("repetition_index"))): b
        for b in entries
        if b["run_type"] == "iteration" or "aggregate_name" in b
    }


# --- real files -------------------------------------------------------------------------


def test_bpfilter_units_params_counters_and_context() -> None:
    parsed = parse(BPFILTER)

    assert len(parsed.results) == 26  # 10 instances x (real, cpu) + 6 nInsn counters
    load = row(parsed, "loadChainLargeSet", {"args": "10000", "iterations": "10"}, "real_time")
    assert load["suite"] == "benchmark_bin"
    assert (load["value"], load["unit"]) == (20.234360899999615, "ms")
    assert "samples" not in load  # one repetition: a value, not a distribution
    assert load["extra"] == {"iterations": 10, "threads": 1, "repetitions": 1}
    cpu = row(parsed, "loadChainLargeSet", {"args": "10000", "iterations": "10"}, "cpu_time")
    assert (cpu["value"], cpu["unit"]) == (0.4937724000000001, "ms")
    drop = row(parsed, "dropAfterXRules", {"args": "8"}, "real_time")
    assert (drop["value"], drop["unit"]) == (103.36603642857207, "ns")
    insn = row(parsed, "dropAfterXRules", {"args": "8"}, "nInsn")
    assert (insn["value"], insn["unit"], insn["higher_is_better"]) == (361.0, "", False)
    assert row(parsed, "firstRuleDropCounter", {}, "nInsn")["value"] == 218.0

    assert parsed.machine["hostname"] == "f12cc829b969"
    assert parsed.machine["cpu_count"] == 4
    assert parsed.machine["device"] == "cpu"
    assert parsed.machine["extra"]["mhz_per_cpu"] == 3263
    assert parsed.environment == {
        "packages": {"google-benchmark": "1.9.4"},
        "extra": {"library_build_type": "release"},
    }
    assert parsed.run["started_at"] == "2025-11-24T12:33:33+00:00"
    assert parsed.run["extra"]["context"]["gitrev"] == "fd8dc28"
    assert parsed.run["extra"]["load_avg"] == [2.06641, 0.721191, 0.258789]


def test_kokkos_manual_time_and_counter_directions() -> None:
    parsed = parse(KOKKOS)

    params = {"args": "16", "time_type": "manual_time"}
    assert len(parsed.results) == 24
    assert {r["suite"] for r in parsed.results} == {"Kokkos_PerformanceTest_MDRangePolicy_Stream"}
    real = row(parsed, "MDRangePolicy_Set<1>", params, "real_time")
    assert (real["value"], real["unit"]) == (4.855452933774834, "ms")
    fom = row(parsed, "MDRangePolicy_Set<1>", params, "FOM: GB/s")
    assert (fom["value"], fom["unit"], fom["higher_is_better"]) == (27.64267923727014, "", True)
    size = row(parsed, "MDRangePolicy_Triad<6>", params, "MB")
    assert (size["value"], size["higher_is_better"]) == (402.653184, False)
    assert parsed.run["extra"]["context"]["GIT_COMMIT_HASH"] == "fea9315"
    assert "packages" not in parsed.environment  # no library_version in this file


def test_old_file_without_zone_or_family_index() -> None:
    parsed = parse(OLD)

    assert [(r["model"], r["metric"]) for r in parsed.results] == [
        ("fib_10", "real_time"),
        ("fib_10", "cpu_time"),
        ("fib_20", "real_time"),
        ("fib_20", "cpu_time"),
    ]
    assert parsed.results[0]["suite"] == "a.out"
    assert parsed.results[0]["value"] == 2.1498980114547953e02
    assert "started_at" not in parsed.run  # a local time of an unknown zone is not a start
    assert parsed.run["extra"]["date"] == "2019-11-29 21:26:59"


# --- repetitions and aggregates (the generated file) ------------------------------------


def test_repetitions_are_samples_and_the_median_aggregate_is_the_value() -> None:
    raw = raw_entries(document(), "sum_list/8")
    parsed = parse(REPEATED)

    for metric, unit in [("real_time", "ns"), ("cpu_time", "ns"), ("bytes_per_second", "B/s")]:
        result = row(parsed, "sum_list", {"args": "8"}, metric)
        assert result["samples"] == [raw[str(i)][metric] for i in range(3)]
        assert len(result["samples"]) == raw["0"]["repetitions"] == 3
        assert result["value"] == raw["median"][metric]
        assert result["unit"] == unit
        assert result["extra"]["aggregates"] == {
            name: raw[name][metric] for name in ("mean", "median", "stddev", "cv")
        }
    items = row(parsed, "sum_list", {"args": "8"}, "items_per_second")
    assert (items["unit"], items["value"]) == ("items/s", raw["median"]["items_per_second"])
    real = row(parsed, "sum_list", {"args": "8"}, "real_time")
    assert real["extra"]["repetitions"] == 3
    assert real["extra"]["iterations"] == raw["0"]["iterations"]


def test_the_median_aggregate_wins_over_the_median_of_samples() -> None:
    raw = raw_entries(document(), "sum_list/8")
    cpu = row(parse(REPEATED), "sum_list", {"args": "8"}, "cpu_time")

    # Google Benchmark's median differs from the samples' in the last digit here.
    assert raw["median"]["cpu_time"] != statistics.median(cpu["samples"])
    assert cpu["value"] == raw["median"]["cpu_time"]


def test_user_counters_keep_their_names() -> None:
    parsed = parse(REPEATED)

    elements = row(parsed, "sum_list", {"args": "64"}, "elements")
    assert (elements["value"], elements["unit"], elements["higher_is_better"]) == (64.0, "", False)
    assert elements["samples"] == [64.0, 64.0, 64.0]
    rate = row(parsed, "sum_list", {"args": "64"}, "adds_per_second")
    assert (rate["unit"], rate["higher_is_better"]) == ("", True)


def test_unit_label_and_iterations_option() -> None:
    raw = raw_entries(document(), "sorted_small/iterations:200")
    real = row(parse(REPEATED), "sorted_small", {"iterations": "200"}, "real_time")

    assert real["unit"] == "us"
    assert real["value"] == raw["median"]["real_time"]
    assert real["extra"]["label"] == "reversed input"


def test_errors_become_failed_rows() -> None:
    parsed = parse(REPEATED)

    failed = [r for r in parsed.results if r["model"] == "broken"]
    assert [(r["metric"], r["status"], r["unit"]) for r in failed] == [
        ("real_time", "failed", "ns"),
        ("cpu_time", "failed", "ns"),
    ]
    assert {r["reason"] for r in failed} == {"fixture: this benchmark always fails"}
    assert all("value" not in r for r in failed)


def test_complexity_fits_go_to_the_run_not_to_rows() -> None:
    parsed = parse(REPEATED)

    assert not [r for r in parsed.results if r["params"] == {} and r["model"] == "join_strings"]
    fit = parsed.run["extra"]["complexity"]["join_strings"]
    assert fit["big_o"] == "N"
    assert set(fit) == {"big_o", "real_coefficient", "cpu_coefficient", "time_unit", "rms"}
    assert len([r for r in parsed.results if r["model"] == "join_strings"]) == 6
    assert parsed.run["extra"]["context"] == {"GIT_COMMIT": "0123abc"}
    assert parsed.environment["packages"] == {"google-benchmark": "1.9.5"}


def test_without_a_median_aggregate_the_median_of_repetitions() -> None:
    doc = document()
    doc["benchmarks"] = [b for b in doc["benchmarks"] if b["run_type"] == "iteration"]

    real = row(parse_document(doc), "sum_list", {"args": "8"}, "real_time")

    assert real["value"] == statistics.median(real["samples"])
    assert "aggregates" not in real["extra"]


def test_aggregates_only_give_a_value_without_samples() -> None:
    doc = document()
    doc["benchmarks"] = [b for b in doc["benchmarks"] if b["run_type"] == "aggregate"]
    raw = raw_entries(document(), "sum_list/8")

    real = row(parse_document(doc), "sum_list", {"args": "8"}, "real_time")

    assert real["value"] == raw["median"]["real_time"]
    assert "samples" not in real


@pytest.mark.parametrize("name", ALL_FILES)
def test_rows_machine_environment_and_run_are_ingestible(name: str) -> None:
    parsed = parse(name)

    run = ingestible_run(parsed)
    assert len(run.results) == len(parsed.results) > 0
    assert_one_row_per_series(run.results)


def test_hints_win() -> None:
    hints = Hints(suite="bpf", config="default", precision="fp16", mode="training", device="cuda")
    parsed = parse(BPFILTER, hints)

    assert {(r["suite"], r["mode"], r["precision"], r["config"]) for r in parsed.results} == {
        ("bpf", "training", "fp16", "default")
    }
    assert parsed.machine["device"] == "cuda"


# --- names, params, counters ------------------------------------------------------------


@pytest.mark.parametrize(
    ("run_name", "model", "params"),
    [
        ("BM_x", "BM_x", {}),
        ("BM_x/8/64", "BM_x", {"args": "8/64"}),
        ("BM_x/8/repeats:5", "BM_x", {"args": "8"}),
        ("BM_x/x:8/y:64/threads:2", "BM_x", {"args": "x:8/y:64", "threads": "2"}),
        (
            "MDRangePolicy_Set<1>/16/manual_time",
            "MDRangePolicy_Set<1>",
            {"args": "16", "time_type": "manual_time"},
        ),
        (
            "BM_y/min_time:0.010/min_warmup_time:0.100/process_time",
            "BM_y",
            {"min_time": "0.010", "min_warmup_time": "0.100", "time_type": "process_time"},
        ),
    ],
)
def test_split_run_name(run_name: str, model: str, params: dict[str, str]) -> None:
    assert split_run_name(run_name) == (model, params)


def test_repeats_in_the_name_keep_the_series() -> None:
    doc = document(OLD)
    once = parse_document(doc).results
    for entry in doc["benchmarks"]:
        entry["run_name"] = entry["name"] = f"{entry['name']}/repeats:1"

    again = parse_document(doc).results

    assert [(r["model"], r["params"]) for r in again] == [(r["model"], r["params"]) for r in once]


def test_a_counter_named_like_a_benchwatch_metric_is_renamed() -> None:
    doc = document(OLD)
    doc["benchmarks"][0]["latency"] = 3.0
    doc["benchmarks"][0]["GFLOPS per sec"] = 7.5

    metrics = {r["metric"]: r for r in parse_document(doc).results if r["model"] == "fib_10"}

    assert set(metrics) == {"real_time", "cpu_time", "counter_latency", "GFLOPS per sec"}
    assert metrics["GFLOPS per sec"]["higher_is_better"] is True
    ResultIn.model_validate(metrics["counter_latency"])


def test_non_finite_counters_are_left_out() -> None:
    doc = document(OLD)
    doc["benchmarks"][0]["ratio"] = float("inf")

    metrics = [r["metric"] for r in parse_document(doc).results if r["model"] == "fib_10"]

    assert metrics == ["real_time", "cpu_time"]


def test_skipped_benchmarks_become_skipped_rows() -> None:
    doc = document(OLD)
    entry = doc["benchmarks"][0]
    entry.update(skipped=True, skip_message="needs AVX-512")
    del entry["real_time"]

    rows = [r for r in parse_document(doc).results if r["model"] == "fib_10"]

    assert {(r["status"], r["reason"]) for r in rows} == {("skipped", "needs AVX-512")}
    TypeAdapter(list[ResultIn]).validate_python(rows)


# --- errors -----------------------------------------------------------------------------


def test_invalid_json_names_the_line() -> None:
    error = upload_error(b'{\n  "context": {},\n  "benchmarks": [\n    {"name": \n  ]\n}')

    assert error.line == 5
    assert "invalid JSON" in error.message


@pytest.mark.parametrize(
    ("content", "field"),
    [(b'"x"', None), (b'{"context": {}}', "benchmarks"), (b'{"benchmarks": 3}', "benchmarks")],
)
def test_not_a_google_benchmark_document(content: bytes, field: str | None) -> None:
    error = upload_error(content)

    assert (error.record, error.field) == (None, field)


def _broken(key: str, value: Any, index: int = 1, name: str = BPFILTER) -> dict[str, Any]:
    """A file with one field of benchmarks[index] set (None: removed)."""
    doc = document(name)
    if value is None:
        del doc["benchmarks"][index][key]
    else:
        doc["benchmarks"][index][key] = value
    return doc


@pytest.mark.parametrize(
    ("key", "value", "field"),
    [
        ("real_time", None, "benchmarks[1].real_time"),
        ("real_time", "12ms", "benchmarks[1].real_time"),
        ("real_time", -3.0, "benchmarks[1].real_time"),
        ("cpu_time", None, "benchmarks[1].cpu_time"),
        ("cpu_time", False, "benchmarks[1].cpu_time"),
        ("time_unit", None, "benchmarks[1].time_unit"),
        ("time_unit", "fortnights", "benchmarks[1].time_unit"),
        ("run_type", "warmup", "benchmarks[1].run_type"),
        ("run_name", 7, "benchmarks[1].run_name"),
        ("run_type", "aggregate", "benchmarks[1].aggregate_name"),
    ],
)
def test_bad_benchmark_names_record_and_field(key: str, value: Any, field: str) -> None:
    error = upload_error(_broken(key, value))

    assert error.record == 1
    assert error.field == field
    assert str(error).startswith("bad.json, record 1, field ")


def test_missing_name_in_an_old_file() -> None:
    doc = document(OLD)
    del doc["benchmarks"][1]["run_name"]
    del doc["benchmarks"][1]["name"]

    error = upload_error(doc)

    assert (error.record, error.field) == (1, "benchmarks[1].name")


def test_nan_timing_from_a_literal() -> None:
    text = (DATA / OLD).read_text().replace("2.1365507206163295e+02", "NaN")

    error = upload_error(text.encode())

    assert (error.record, error.field) == (0, "benchmarks[0].cpu_time")


def test_one_family_registered_twice_is_refused() -> None:
    doc = document(BPFILTER)
    twin = copy.deepcopy(doc["benchmarks"][4])
    twin["family_index"] = 9
    doc["benchmarks"].append(twin)

    error = upload_error(doc)

    assert (error.record, error.field) == (10, "benchmarks[10].run_name")
    assert "benchmarks[4]" in error.message


def test_time_units_differ_within_one_instance() -> None:
    doc = document()
    doc["benchmarks"][1]["time_unit"] = "ms"

    error = upload_error(doc)

    assert (error.record, error.field) == (1, "benchmarks[1].time_unit")
