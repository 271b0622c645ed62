"""vLLM benchmark results -> native rows: real serving, latency and throughput files, per-request
samples and their cap, JSON lines, the upload API, recognition, and hostile files."""

import json
import re
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.uploads import limits
from app.uploads.base import Hints, OverLimit, Parsed, UploadError, UploadFile
from app.uploads.vllm import parse_vllm
from tests.uploads.rows import assert_ingestible_and_recognised
from tests.uploads.test_api import refused_upload, upload

DATA = Path(__file__).parents[1] / "data" / "uploads" / "vllm"
SERVE = "er0080__bench_serve_v0.25.1.json"
FAILED = "er0080__bench_serve_all_requests_failed_v0.25.1.json"
DETAILED = "llm-k8s__serving_Llama-3.3-70B-Instruct_tp8_pp1_sharegpt_qps_01_subset.json"
LATENCY = "latency_llama8B_tp1.json"
THROUGHPUT = "throughput_llama8B_tp1.json"
ALL_FILES = [SERVE, FAILED, DETAILED, LATENCY, THROUGHPUT]
CUDA = Hints(device="cuda")
STATISTIC = re.compile(r"(mean|median|std|p\d+)_(ttft|tpot|itl|e2el)_ms")


def parse(name: str, content: bytes | None = None, hints: Hints = CUDA) -> Parsed:
    data = (DATA / name).read_bytes() if content is None else content
    return parse_vllm(UploadFile(name, data), hints)


def document(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((DATA / name).read_text())
    return loaded


def refused(content: dict[str, Any] | str, name: str = "serve.json") -> UploadError:
    text = content if isinstance(content, str) else json.dumps(content)
    with pytest.raises(UploadError) as caught:
        parse_vllm(UploadFile(name, text.encode()), CUDA)
    return caught.value


def by_metric(parsed: Parsed) -> dict[str, dict[str, Any]]:
    return {r["metric"]: r for r in parsed.results}


# --- real files --------------------------------------------------------------------------------


def test_a_serving_result_gives_rates_and_every_latency_statistic() -> None:
    raw = document(SERVE)
    rows = by_metric(parse(SERVE))

    for key, unit in [
        ("request_throughput", "req/s"),
        ("output_throughput", "tokens/s"),
        ("total_token_throughput", "tokens/s"),
        ("max_output_tokens_per_s", "tokens/s"),
    ]:
        assert (rows[key]["value"], rows[key]["unit"], rows[key]["higher_is_better"]) == (
            raw[key],
            unit,
            True,
        )
    statistics_in_file = [k for k in raw if STATISTIC.fullmatch(k)]
    assert len(statistics_in_file) == 12
    for key in statistics_in_file:
        statistic, name = STATISTIC.fullmatch(key).groups()  # type: ignore[union-attr]
        row = rows[f"{name}_{statistic}"]
        assert (row["value"], row["unit"], row["higher_is_better"]) == (raw[key], "ms", False)
    first = parse(SERVE).results[0]
    assert first["model"] == raw["model_id"] == "facebook/opt-125m"
    assert first["params"] == {
        "backend": "vllm",
        "endpoint_type": "vllm",
        "request_rate": "inf",
        "burstiness": 1.0,
        "max_concurrency": 2,
    }
    assert first["extra"]["num_prompts"] == raw["num_prompts"]
    assert first["extra"]["date"] == raw["date"]
    assert "request_goodput" not in rows  # null in the file


def test_per_request_times_are_the_median_rows_samples_in_ms() -> None:
    raw = document(DETAILED)
    rows = by_metric(parse(DETAILED))

    assert rows["ttft_median"]["samples"] == [t * 1000 for t in raw["ttfts"]]
    assert rows["itl_median"]["samples"] == [t * 1000 for itl in raw["itls"] for t in itl]
    assert rows["ttft_median"]["value"] == raw["median_ttft_ms"]
    assert "samples" not in rows["ttft_mean"]
    assert rows["request_throughput"]["extra"]["request_errors"] == 0
    assert "generated_texts" not in rows["request_throughput"]["extra"]
    assert "request_goodput" not in rows  # written "request_goodput:", null in this file


def test_a_serving_run_where_no_request_completed_gives_failed_rows() -> None:
    raw = document(FAILED)
    rows = parse(FAILED).results

    assert {r["status"] for r in rows} == {"failed"}
    assert all("value" not in r for r in rows)
    assert rows[0]["reason"] == f"no request completed ({raw['failed']} failed)"


def test_a_latency_result_is_the_median_with_every_iteration_as_a_sample() -> None:
    raw = document(LATENCY)
    rows = by_metric(parse(LATENCY))

    latency = rows["latency"]
    assert latency["model"] == "llama8B_tp1"  # the file's name: the file names no model
    assert latency["samples"] == [t * 1000 for t in raw["latencies"]]
    assert latency["value"] == raw["percentiles"]["50"] * 1000
    assert rows["latency_p99"]["value"] == raw["percentiles"]["99"] * 1000
    assert rows["latency_p90"]["value"] == raw["percentiles"]["90"] * 1000
    assert latency["extra"]["avg_latency"] == raw["avg_latency"]


def test_a_throughput_result_gives_requests_and_tokens_per_second() -> None:
    raw = document(THROUGHPUT)
    rows = by_metric(parse(THROUGHPUT))

    assert rows["requests_per_second"]["value"] == raw["requests_per_second"]
    assert rows["tokens_per_second"]["unit"] == "tokens/s"
    assert rows["requests_per_second"]["extra"]["num_requests"] == raw["num_requests"]


@pytest.mark.parametrize("name", ALL_FILES)
def test_rows_are_ingestible_and_the_file_is_recognised(name: str) -> None:
    file = UploadFile(name, (DATA / name).read_bytes())
    assert_ingestible_and_recognised(parse(name), file, "cuda", "vllm")


def test_appended_results_are_json_lines_of_distinct_loads() -> None:
    one = document(SERVE)
    lines = "\n".join(json.dumps(one | {"request_rate": rate}) for rate in (1.0, 4.0))

    parsed = parse("appended.json", lines.encode())

    assert {r["params"]["request_rate"] for r in parsed.results} == {1.0, 4.0}
    again = refused(lines.replace('"request_rate": 4.0', '"request_rate": 1.0'), "a.json")
    assert (again.line, "the same benchmark as line 1" in again.message) == (2, True)


def test_without_a_device_the_file_is_refused_naming_the_field() -> None:
    with pytest.raises(UploadError) as caught:
        parse(SERVE, hints=Hints())

    assert (caught.value.file, caught.value.field) == (SERVE, "device")


# --- hostile and malformed files ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"request_throughput": "fast"}, "request_throughput"),
        ({"request_throughput": True}, "request_throughput"),
        ({"mean_ttft_ms": -1.0}, "mean_ttft_ms"),
        ({"model_id": 7}, "model_id"),
        ({"model_id": "m" * 300}, "model_id"),
        ({"ttfts": 3}, "ttfts"),
        ({"ttfts": [0.1, "x"]}, "ttfts[1]"),
        ({"itls": [[0.1], 0.2]}, "itls[1]"),
        ({"itls": [[0.1, None]]}, "itls[0][1]"),
    ],
)
def test_bad_serving_values_name_the_field(change: dict[str, Any], field: str) -> None:
    error = refused(document(SERVE) | change)

    assert (error.file, error.field) == ("serve.json", field)


def test_non_finite_numbers_are_refused() -> None:
    text = json.dumps(document(SERVE)).replace(
        '"p99_ttft_ms": 734.4049174101428', '"p99_ttft_ms": NaN'
    )
    nan = refused(text)
    assert nan.field == "p99_ttft_ms"
    assert "not a finite number" in nan.message
    latency = refused(
        json.dumps(document(LATENCY)).replace("7.438288155943155,", "Infinity,", 1), "l.json"
    )
    assert latency.field == "latencies[0]"


def test_per_request_samples_past_the_cap_are_counted_not_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(limits, "MAX_SAMPLES_PER_RESULT", 3)
    rows = by_metric(parse(DETAILED))

    assert "samples" not in rows["itl_median"]
    assert rows["itl_median"]["extra"]["samples_omitted"] == sum(
        len(i) for i in document(DETAILED)["itls"]
    )
    assert "samples" not in rows["ttft_median"]  # 5 requests, over a cap of 3
    latency = refused(json.dumps(document(LATENCY)), "latency_x.json")
    assert isinstance(latency, OverLimit)
    assert latency.field == "latencies"


def test_records_are_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "MAX_RESULTS_PER_FILE", 2)
    lines = "\n".join(json.dumps(document(THROUGHPUT) | {"n": i}) for i in range(3))

    error = refused(lines, "t.json")

    assert isinstance(error, OverLimit)


def test_not_a_vllm_result() -> None:
    assert "not a vLLM result" in refused({"hello": 1}).message
    assert refused("[1, 2]").message == "expected a JSON object"


# --- the upload API ----------------------------------------------------------------------------


def test_a_real_serving_result_uploads_and_reads_back(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    raw = document(DETAILED)
    status, run = upload(
        client, ingest_headers, [(DETAILED, (DATA / DETAILED).read_bytes())], device="cuda"
    )

    assert status == 201, run
    assert run["extra"]["upload"]["formats"] == ["vllm"]  # type: ignore[index]
    stored = {r["metric"]: r for r in client.get(f"/api/v1/runs/{run['id']}").json()["results"]}
    assert stored["request_throughput"]["value"] == pytest.approx(raw["request_throughput"])
    assert stored["ttft_p99"]["value"] == pytest.approx(raw["p99_ttft_ms"])
    assert stored["ttft_median"]["higher_is_better"] is False
    assert stored["ttft_median"]["model"] == raw["model_id"]
    assert len(stored) == len(parse(DETAILED).results)


@pytest.mark.both_dialects
@pytest.mark.parametrize(
    ("content", "fields", "status", "field"),
    [
        ((DATA / SERVE).read_bytes(), {}, 422, "device"),
        (
            json.dumps(document(SERVE) | {"ttfts": [1, [2]]}).encode(),
            {"device": "cuda"},
            422,
            "ttfts[1]",
        ),
        (
            json.dumps(document(SERVE) | {"mean_tpot_ms": 1e999}).encode(),
            {"device": "cuda"},
            422,
            "mean_tpot_ms",
        ),
        (
            json.dumps(document(SERVE) | {"model_id": "m" * 2000}).encode(),
            {"device": "cuda"},
            413,
            "model_id",
        ),
    ],
)
def test_bad_files_are_refused_through_the_api_with_file_and_place(
    client: TestClient,
    ingest_headers: dict[str, str],
    content: bytes,
    fields: dict[str, str],
    status: int,
    field: str,
) -> None:
    error = refused_upload(
        client, ingest_headers, "serve.json", content, status, format="vllm", **fields
    )
    assert error["field"] == field
