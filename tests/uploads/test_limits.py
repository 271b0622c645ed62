"""Hostile files cost nothing: every parser is linear, held to the caps of app.uploads.limits,
and refuses what no column can hold (with the file, line or record, and field) instead of
failing later. Timed tests allow many times what the linear code takes; the code they guard
against took seconds to minutes."""

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from app.uploads import google_benchmark, limits, pytest_benchmark, torchbench
from app.uploads.base import Hints, OverLimit, Parsed, UploadError, UploadFile
from app.uploads.google_benchmark import parse_google_benchmark
from app.uploads.pytest_benchmark import parse_pytest_benchmark
from app.uploads.pytorch_v3 import parse_pytorch_v3
from app.uploads.torchbench import parse_torchbench

PERF = "inductor_torchbench_amp_training_cuda_performance.csv"
BIG = 2**40  # fits 64 bits, not an INTEGER column
DIGITS_5000 = "1" * 5000


@contextmanager
def within(seconds: float) -> Iterator[None]:
    began = time.perf_counter()
    yield
    elapsed = time.perf_counter() - began
    assert elapsed < seconds, f"took {elapsed:.2f} s"


def refused(parse: Callable[[UploadFile, Hints], Parsed], name: str, content: str) -> UploadError:
    with pytest.raises(UploadError) as caught:
        parse(UploadFile(name, content.encode()), Hints())
    return caught.value


CSV = "dev,name,batch_size,speedup"


def csv_error(*rows: str, header: str = CSV) -> UploadError:
    return refused(parse_torchbench, PERF, "\n".join((header, *rows, "")))


# --- torchbench CSV --------------------------------------------------------------------------


def test_a_long_bad_number_is_refused_in_linear_time() -> None:
    # The old pattern took seconds for 8,000 digits and an x, and grew with their square.
    with within(0.5), pytest.raises(UploadError, match="not a number"):
        torchbench._number(PERF, 2, "speedup", "1" * 20_000 + "x")


def test_a_cell_over_the_cap_is_refused_with_line_and_column() -> None:
    error = csv_error("cuda,BERT,8,1.5", f"cuda,T5,8,{'1' * limits.MAX_CELL_CHARS}x")
    assert isinstance(error, OverLimit)
    assert (error.line, error.field) == (3, "speedup")
    assert f"at most {limits.MAX_CELL_CHARS}" in error.message


def test_50000_columns_are_refused_at_once() -> None:
    header = ",".join(["name", *(f"c{i}" for i in range(50_000))])
    with within(1.0):
        error = csv_error("m," + ",".join(["1"] * 50_000), header=header)
    assert isinstance(error, OverLimit)
    assert error.line == 1
    assert f"at most {limits.MAX_COLUMNS} columns" in error.message


def test_the_duplicate_column_check_is_linear() -> None:
    # The old check compared each column with every one before it: 29 s for 50,000 columns.
    header = ["name", *(f"c{i}" for i in range(40_000))]
    with within(0.5):
        assert torchbench._check_header(PERF, 1, header) == header
    with pytest.raises(UploadError, match="twice"):
        torchbench._check_header(PERF, 1, [*header, "c7"])


def test_lines_are_capped_in_number_and_length(monkeypatch: pytest.MonkeyPatch) -> None:
    error = csv_error("cuda,BERT,8,1.5", "," * (limits.MAX_CSV_LINE_CHARS + 1))
    assert isinstance(error, OverLimit)
    assert error.line == 3
    monkeypatch.setattr(limits, "MAX_LINES", 10)
    error = csv_error("cuda,BERT,8,1.5", *[""] * 10)
    assert isinstance(error, OverLimit)
    assert "more than 10 lines" in error.message


def test_values_no_column_holds_are_refused_with_line_and_field() -> None:
    too_large = csv_error("cuda,BERT,8,1.5", f"cuda,T5,{BIG},1.5")
    assert (too_large.line, too_large.field) == (3, "batch_size")
    assert "at most 2147483647" in too_large.message
    assert csv_error(f"cuda,T5,{'9' * 4000},1.5").field == "batch_size"
    infinite = csv_error(f"cuda,T5,8,{'9' * 400}")
    assert (infinite.line, infinite.field) == (2, "speedup")
    assert "overflows to infinity" in infinite.message
    nul = csv_error("cuda,BERT,8,1.5", "cuda,T\x005,8,1.5")
    assert (nul.line, nul.message) == (3, "a NUL character: it cannot be stored")


def test_rows_past_the_results_cap_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "MAX_RESULTS_PER_FILE", 10)
    rows = csv_error(*(f"cuda,m{i},8,1.5" for i in range(11)), "", "")  # counted, not read
    assert isinstance(rows, OverLimit)
    assert "more than 10 rows" in rows.message
    two_each = csv_error(*(f"cuda,m{i},8,1.5,2.5" for i in range(6)), header=f"{CSV},latency")
    assert isinstance(two_each, OverLimit)
    assert (two_each.line, "more than 10 results" in two_each.message) == (7, True)


# --- JSON, every format ----------------------------------------------------------------------


def v3_record(**changes: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "benchmark": {"name": "micro", "extra_info": {}},
        "model": {"name": "add"},
        "metric": {"name": "latency", "benchmark_values": [1.0, 2.0]},
    }
    return record | changes


def v3_error(records: Any, replace: tuple[str, str] | None = None) -> UploadError:
    text = json.dumps(records, indent=1)
    return refused(parse_pytorch_v3, "up.json", text.replace(*replace) if replace else text)


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("depth", [995, 100, limits.MAX_JSON_DEPTH + 1])
def test_deep_nesting_is_refused_with_where(depth: int) -> None:
    marker = ('"extra_info": {}', f'"extra_info": {{"x": {nested(depth - 4)}}}')
    error = v3_error([v3_record()], marker)  # the list, the record, benchmark, extra_info
    assert isinstance(error, OverLimit)
    assert f"deeper than {limits.MAX_JSON_DEPTH}" in error.message
    if depth < 990:  # json.loads itself gives up near 1,000, before any walk says where
        assert str(error.field).startswith("[0].benchmark.extra_info.x[0][0]")


def test_nesting_at_the_cap_is_read() -> None:
    marker = ('"extra_info": {}', f'"extra_info": {{"x": {nested(limits.MAX_JSON_DEPTH - 4)}}}')
    text = json.dumps([v3_record()]).replace(*marker)
    parsed = parse_pytorch_v3(UploadFile("up.json", text.encode()), Hints())
    assert parsed.results[0]["extra"]["benchmark"]["extra_info"]["x"]


def test_numbers_that_fit_no_column_are_refused_with_their_line() -> None:
    huge = v3_error([v3_record()], ("1.0,", f"{DIGITS_5000},"))
    assert "(5000 digits) does not fit in 64 bits" in huge.message
    assert huge.line == 13  # of json.dumps(..., indent=1): the first of benchmark_values
    in_extra = v3_error([v3_record()], ('"extra_info": {}', f'"extra_info": {{"n": -{BIG**2}}}'))
    assert "does not fit in 64 bits" in in_extra.message
    infinite = v3_error([v3_record()], ("1.0,", "1e400,"))
    assert "1e400 is out of range (overflows to infinity)" in infinite.message
    assert limits.parse_json("f", f"[{2**63 - 1}, {-(2**63)}, 1e308]") == [
        2**63 - 1,
        -(2**63),
        1e308,
    ]


def test_nul_characters_are_refused_but_an_escaped_backslash_is_text() -> None:
    for nul in (v3_record(model={"name": "a\x00b"}), v3_record(metric={"n\x00": 1})):
        error = v3_error([nul])
        assert "NUL" in error.message
        assert error.line is not None
    assert limits.parse_json("f", r'["\\u0000", "\\\\u0000"]') == ["\\u0000", "\\\\u0000"]
    with pytest.raises(UploadError, match="NUL"):
        limits.parse_json("f", r'["\\\u0000"]')


def test_too_many_containers_are_refused_before_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "MAX_JSON_CONTAINERS", 100)
    with pytest.raises(OverLimit, match="more than 100 JSON objects and arrays"):
        limits.parse_json("f", "[" + ",".join(["[]"] * 100) + "]")
    # brackets inside strings are not containers
    assert len(limits.parse_json("f", json.dumps(["[{" * 100, {}]))) == 2


def test_v3_values_no_column_holds() -> None:
    for record, field in [
        (v3_record(timestamp=1e20), "timestamp"),
        (v3_record(timestamp=32503680000), "timestamp"),  # the year 3000
        (
            v3_record(benchmark={"name": "b", "extra_info": {"batch_size": BIG}}),
            "benchmark.extra_info.batch_size",
        ),
        (v3_record(runners=[{"name": "cuda", "gpu_count": BIG}]), "runners[0].gpu_count"),
        (v3_record(runners=[{"name": "cuda", "cpu_count": BIG}]), "runners[0].cpu_count"),
    ]:
        error = v3_error([record])
        assert (error.record, error.field) == (0, field)
    overflow = v3_error([v3_record(timestamp=1)], ('"timestamp": 1', '"timestamp": 1e400'))
    assert "overflows to infinity" in overflow.message


def test_v3_records_and_values_are_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "MAX_RESULTS_PER_FILE", 3)
    lines = "\n".join(json.dumps(v3_record(model={"name": f"m{i}"})) for i in range(4))
    counted = refused(parse_pytorch_v3, "up.jsonl", lines)
    assert isinstance(counted, OverLimit)
    assert "more than 3 records" in counted.message
    two = [v3_record(model={"name": f"m{i}"}) for i in range(2)]
    lists = refused(parse_pytorch_v3, "up.jsonl", f"{json.dumps(two)}\n{json.dumps(two)}")
    assert isinstance(lists, OverLimit)
    assert lists.line == 2
    assert isinstance(v3_error([v3_record(model={"name": f"m{i}"}) for i in range(4)]), OverLimit)
    monkeypatch.setattr(limits, "MAX_SAMPLES_PER_RESULT", 5)
    values = v3_error([v3_record(metric={"name": "latency", "benchmark_values": [1.0] * 6})])
    assert isinstance(values, OverLimit)
    assert (values.record, values.field) == (0, "metric.benchmark_values")


def test_the_parse_deadline_stops_a_parser_between_records() -> None:
    records = [v3_record(model={"name": f"m{i}"}) for i in range(50)]
    content = UploadFile("up.json", json.dumps(records).encode())
    with limits.parse_deadline(-1.0), pytest.raises(OverLimit) as caught:
        parse_pytorch_v3(content, Hints())
    assert "BENCHWATCH_PARSE_TIMEOUT_S" in caught.value.message
    assert caught.value.record == 0
    with limits.parse_deadline(60.0):
        assert len(parse_pytorch_v3(content, Hints()).results) == 50


# --- pytest-benchmark ------------------------------------------------------------------------


def pytest_doc(**entry: Any) -> dict[str, Any]:
    benchmark = {"name": "test_x", "fullname": "bench.py::test_x", "stats": {"median": 0.001}}
    return {"machine_info": {}, "benchmarks": [benchmark | entry]}


def pytest_error(document: dict[str, Any]) -> UploadError:
    return refused(parse_pytest_benchmark, "bench.json", json.dumps(document))


def test_parameter_ids_are_split_in_linear_time() -> None:
    # The old pattern scanned to the end from every "[": seconds for 20,000 of them.
    with within(0.2):
        assert pytest_benchmark._split_param_id("test_x" + "[" * 100_000) == (
            "test_x" + "[" * 100_000,
            None,
        )
    assert pytest_benchmark._split_param_id("T::test_x[a-[1]]") == ("T::test_x", "a-[1]")
    assert pytest_benchmark._split_param_id("[a]") == ("[a]", None)
    assert pytest_benchmark._split_param_id("x[a\nb[c]") == ("x[a\nb", "c")
    assert pytest_benchmark._split_param_id("test[a]\n") == ("test", "a")


def test_names_over_the_cap_are_refused() -> None:
    long = "test_x" + "[" * limits.MAX_NAME_CHARS
    error = pytest_error(pytest_doc(name=long, fullname=f"b.py::{long}"))
    assert isinstance(error, OverLimit)
    assert (error.record, error.field) == (0, "benchmarks[0].name")


def test_pytest_values_no_column_holds() -> None:
    late = pytest_error(pytest_doc() | {"datetime": "9999-12-31T23:59:59-14:00"})
    assert late.field == "datetime"
    cpus = pytest_error(pytest_doc() | {"machine_info": {"cpu": {"count": BIG}}})
    assert cpus.field == "machine_info.cpu.count"
    stats = pytest_error(pytest_doc(stats=[1, 2]))
    assert stats.field == "benchmarks[0].stats"


# --- Google Benchmark ------------------------------------------------------------------------


def gbench_entry(index: int = 0, **changes: Any) -> dict[str, Any]:
    entry = {
        "name": "BM_x/8",
        "family_index": 0,
        "run_name": "BM_x/8",
        "run_type": "iteration",
        "repetition_index": index,
        "iterations": 1000,
        "real_time": 1.5 + index % 3,
        "cpu_time": 1.5,
        "time_unit": "ns",
    }
    return entry | changes


def gbench(entries: list[Any]) -> str:
    return json.dumps({"context": {"executable": "bench_x"}, "benchmarks": entries})


def test_repetitions_are_read_in_linear_time() -> None:
    # The old reader copied every repetition so far for each new one: 3.3 s for 40,000 (1.2 s
    # for 80,000 now).
    document = gbench([gbench_entry(i) for i in range(80_000)])
    with within(4.0):
        parsed = parse_google_benchmark(UploadFile("b.json", document.encode()), Hints())
    real_time = parsed.results[0]
    assert (real_time["metric"], len(real_time["samples"])) == ("real_time", 80_000)


def test_repetitions_past_the_samples_cap_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "MAX_SAMPLES_PER_RESULT", 10)
    error = refused(parse_google_benchmark, "b.json", gbench([gbench_entry(i) for i in range(11)]))
    assert isinstance(error, OverLimit)
    assert "11 repetitions of 'BM_x/8'; at most 10" in error.message
    # and again as they are read, with the record of the first one over
    monkeypatch.setattr(google_benchmark, "_count_repetitions", lambda file, entries: None)
    again = refused(parse_google_benchmark, "b.json", gbench([gbench_entry(i) for i in range(11)]))
    assert isinstance(again, OverLimit)
    assert again.record == 10


def test_a_family_index_that_is_not_a_number_is_refused() -> None:
    for family in ([1], {"a": 1}, "0", True):
        error = refused(
            parse_google_benchmark, "b.json", gbench([gbench_entry(family_index=family)])
        )
        assert (error.record, error.field) == (0, "benchmarks[0].family_index")


def test_gbench_names_and_counts_over_the_caps() -> None:
    slashes = "BM" + "/" * limits.MAX_NAME_CHARS
    name = refused(parse_google_benchmark, "b.json", gbench([gbench_entry(run_name=slashes)]))
    assert isinstance(name, OverLimit)
    assert name.field == "benchmarks[0].run_name"
    document = json.loads(gbench([gbench_entry()]))
    document["context"]["num_cpus"] = BIG
    cpus = refused(parse_google_benchmark, "b.json", json.dumps(document))
    assert cpus.field == "context.num_cpus"
