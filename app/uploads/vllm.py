"""vLLM's benchmark results (``vllm bench serve|latency|throughput``, ``benchmarks/*.py``) as rows.

Three kinds of file, told apart by their keys:

* serving (``--save-result``; JSON lines with ``--append-result``): ``request_throughput``,
  ``output_throughput``, ``total_token_throughput`` (and ``request_goodput``,
  ``max_output_tokens_per_s``) as rates, and every ``<mean|median|std|pNN>_<ttft|tpot|itl|
  e2el>_ms`` statistic as ``<ttft|...>_<mean|median|std|pNN>`` in ms; the per-request
  ``ttfts``, ``itls`` (and ``e2els``), seconds in the file, are the ``samples`` of the
  matching median row (past ``MAX_SAMPLES_PER_RESULT`` they are counted, not kept);
* latency (``--output-json``): ``latency`` (ms) is the median of ``latencies`` with each
  iteration as a sample, ``latency_p90`` and ``latency_p99`` from ``percentiles``;
* throughput (``--output-json``): ``requests_per_second`` (req/s), ``tokens_per_second``.

Identity: ``model`` is the serving file's ``model_id``; the latency and throughput files name
no model, so their file's name does (``latency_llama8B_tp1.json`` -> ``llama8B_tp1``).
``params`` hold what sets a serving run's load (``backend``, ``endpoint_type``,
``request_rate``, ``burstiness``, ``max_concurrency``, ``label``); the workload (prompts,
tokens, duration, ``date``) goes to the first row's ``extra``. A serving run where no request
completed gives ``failed`` rows. No file says the device: ``device=`` is required.
"""

import re
import statistics
from pathlib import PurePosixPath
from typing import Any

from app.uploads import limits, reading
from app.uploads.base import Hints, Parsed, UploadError, UploadFile, UploadFormat
from app.uploads.benchmarks_json import json_safe

SUITE = "vllm"
TO_MS = 1000.0  # the files' per-request times and latencies are seconds
RATES = {
    "request_throughput": "req/s",
    "request_goodput": "req/s",
    "request_goodput:": "req/s",  # vLLM's own spelling before 0.7
    "output_throughput": "tokens/s",
    "total_token_throughput": "tokens/s",
    "max_output_tokens_per_s": "tokens/s",
}
STATISTIC = re.compile(r"(mean|median|std|p\d{1,3}(?:\.\d{1,4})?)_(ttft|tpot|itl|e2el)_ms")
PER_REQUEST = {"ttfts": "ttft", "itls": "itl", "e2els": "e2el"}
LOAD = ("backend", "endpoint_type", "request_rate", "burstiness", "max_concurrency", "label")
DROPPED = frozenset({"input_lens", "output_lens", "generated_texts", "errors", "start_times"})
THROUGHPUT = {"requests_per_second": "req/s", "tokens_per_second": "tokens/s"}
LATENCY_PERCENTILES = {"90": "latency_p90", "99": "latency_p99"}
KIND_PREFIXES = ("latency_", "throughput_")


def parse_vllm(file: UploadFile, hints: Hints) -> Parsed:
    """Rows of a vLLM serving, latency or throughput result file (or serving JSON lines)."""
    device = reading.required_device(file, hints, "vLLM's benchmarks")
    documents = reading.load_json_lines(file)
    limits.check_results(file.name, len(documents), what="records")
    results: list[dict[str, Any]] = []
    seen: dict[str, int | None] = {}
    for index, (line, document) in enumerate(documents):
        limits.check_deadline(file.name, line=line)
        record = index if line is not None else None
        rows = _document_rows(file, document, hints, record, line)
        identity = repr((rows[0]["model"], sorted(rows[0]["params"].items())))
        if identity in seen:
            message = f"the same benchmark as line {seen[identity]}"
            raise UploadError(file.name, message, line=line, record=record)
        seen[identity] = line
        results += rows
        limits.check_results(file.name, len(results), line=line)
    return Parsed(results=results, machine={"device": device})


def _document_rows(
    file: UploadFile, document: Any, hints: Hints, record: int | None, line: int | None
) -> list[dict[str, Any]]:
    if not isinstance(document, dict):
        raise UploadError(file.name, "expected a JSON object", record=record, line=line)
    where = _Where(file.name, record, line)
    if "request_throughput" in document or "completed" in document:
        return _serving(where, document, hints)
    if "avg_latency" in document or "latencies" in document:
        return _latency(where, file.name, document, hints)
    if "requests_per_second" in document:
        return _throughput(where, file.name, document, hints)
    message = "not a vLLM result: no request_throughput, latencies or requests_per_second"
    raise UploadError(file.name, message, record=record, line=line)


class _Where:
    """The file and record (JSON lines) every error of one document names."""

    def __init__(self, file: str, record: int | None, line: int | None) -> None:
        self.file, self.record, self.line = file, record, line

    def number(self, value: Any, field: str, minimum: float | None = 0.0) -> float:
        return reading.finite(
            self.file, value, field=field, record=self.record, line=self.line, minimum=minimum
        )

    def error(self, message: str, field: str | None = None) -> UploadError:
        return UploadError(self.file, message, record=self.record, line=self.line, field=field)


def _base(hints: Hints, model: str, params: dict[str, Any]) -> dict[str, Any]:
    return {
        "suite": hints.suite or SUITE,
        "model": model,
        "mode": hints.mode or "inference",
        "precision": hints.precision or "fp32",
        "config": hints.config or "eager",
        "params": params,
    }


# --- serving ---------------------------------------------------------------------------------


def _serving(where: _Where, document: dict[str, Any], hints: Hints) -> list[dict[str, Any]]:
    model = reading.text(
        where.file,
        document.get("model_id"),
        field="model_id",
        record=where.record,
        line=where.line,
        limit=256,
    )
    params = {
        key: _load_value(where, document[key], key) for key in LOAD if document.get(key) is not None
    }
    base = _base(hints, model, params)
    rows: list[dict[str, Any]] = []
    for key, unit in RATES.items():
        name = key.rstrip(":")
        if document.get(key) is not None and not any(row["metric"] == name for row in rows):
            value = where.number(document[key], key)
            rows.append(
                {**base, "metric": name, "unit": unit, "higher_is_better": True, "value": value}
            )
    samples = {name: _per_request(where, document, key) for key, name in PER_REQUEST.items()}
    for key, value in document.items():
        if value is not None and (match := STATISTIC.fullmatch(key)):
            statistic, name = match.groups()
            row = {
                **base,
                "metric": f"{name}_{statistic}",
                "unit": "ms",
                "higher_is_better": False,
                "value": where.number(value, key),
            }
            if statistic == "median" and (kept := samples.get(name)) is not None:
                row |= (
                    {"samples": kept}
                    if isinstance(kept, list)
                    else {"extra": {"samples_omitted": kept}}
                )
            rows.append(row)
    if not rows:
        raise where.error("a serving result without request_throughput or latency statistics")
    workload = _workload(document)
    rows[0]["extra"] = {**rows[0].get("extra", {}), **workload}
    if document.get("completed") == 0:
        reason = f"no request completed ({workload.get('failed', 'all')} failed)"
        rows = [{**_failed(row), "reason": reason} for row in rows]
    return rows


def _load_value(where: _Where, value: Any, key: str) -> Any:
    """A load parameter: a name, or a number (``request_rate`` may be ``"inf"``)."""
    if not isinstance(value, str):
        where.number(value, key, minimum=None)
        return value
    return reading.text(
        where.file, value, field=key, record=where.record, line=where.line, limit=256
    )


def _per_request(where: _Where, document: dict[str, Any], key: str) -> list[float] | int | None:
    """Per-request seconds in ms (``itls``: each request's list, flattened); or their count."""
    values = document.get(key)
    if values is None:
        return None
    if not isinstance(values, list):
        raise where.error("expected a list", field=key)
    nested = key == "itls"
    count = sum(len(v) for v in values if isinstance(v, list)) if nested else len(values)
    if count > limits.MAX_SAMPLES_PER_RESULT:
        return count
    samples: list[float] = []
    for at, value in enumerate(values):
        if nested:
            if not isinstance(value, list):
                raise where.error("expected a list of times", field=f"{key}[{at}]")
            samples += [where.number(v, f"{key}[{at}][{i}]") * TO_MS for i, v in enumerate(value)]
        else:
            samples.append(where.number(value, f"{key}[{at}]") * TO_MS)
    return samples or None


def _workload(document: dict[str, Any]) -> dict[str, Any]:
    """What the run was: prompts, tokens, duration, date and other plain values, not rows."""
    workload: dict[str, Any] = {}
    for key, value in document.items():
        skipped = key in DROPPED or key in RATES or key in LOAD or key in PER_REQUEST
        if skipped or key == "model_id" or STATISTIC.fullmatch(key):
            continue
        if isinstance(value, str | int | float | bool | None):
            workload[key[:120]] = value[: reading.MAX_TEXT] if isinstance(value, str) else value
    if isinstance(errors := document.get("errors"), list):
        workload["request_errors"] = sum(1 for error in errors if error)
    safe: dict[str, Any] = json_safe(workload)
    return safe


def _failed(row: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in row.items() if key not in ("value", "samples")} | {
        "status": "failed"
    }


# --- latency and throughput ------------------------------------------------------------------


def _model_of_file(name: str) -> str:
    """``latency_llama8B_tp1.json`` -> ``llama8B_tp1`` (the file is the only name it has)."""
    stem = PurePosixPath(name.replace("\\", "/")).stem
    for prefix in KIND_PREFIXES:
        if stem.startswith(prefix) and len(stem) > len(prefix):
            return stem[len(prefix) :][:256]
    return stem[:256] or "vllm"


def _latency(
    where: _Where, name: str, document: dict[str, Any], hints: Hints
) -> list[dict[str, Any]]:
    latencies = document.get("latencies")
    if not isinstance(latencies, list) or not latencies:
        raise where.error("expected a non-empty list of latencies (seconds)", field="latencies")
    limits.check_samples(where.file, len(latencies), field="latencies", record=where.record)
    samples = [where.number(v, f"latencies[{i}]") * TO_MS for i, v in enumerate(latencies)]
    percentiles = document.get("percentiles", {})
    if not isinstance(percentiles, dict):
        raise where.error("expected an object of percentiles", field="percentiles")
    checked = {str(k)[:16]: where.number(v, f"percentiles.{k}") for k, v in percentiles.items()}
    base = _base(hints, _model_of_file(name), {})
    median = checked["50"] * TO_MS if "50" in checked else statistics.median(samples)
    extra: dict[str, Any] = {"percentiles": checked}
    for key in ("avg_latency", "std_latency"):
        if document.get(key) is not None:
            extra[key] = where.number(document[key], key)
    rows = [
        {
            **base,
            "metric": "latency",
            "unit": "ms",
            "value": median,
            "samples": samples,
            "extra": extra,
        }
    ]
    for percentile, metric in LATENCY_PERCENTILES.items():
        if percentile in checked:
            rows.append(
                {**base, "metric": metric, "unit": "ms", "value": checked[percentile] * TO_MS}
            )
    return rows


def _throughput(
    where: _Where, name: str, document: dict[str, Any], hints: Hints
) -> list[dict[str, Any]]:
    base = _base(hints, _model_of_file(name), {})
    rows = [
        {
            **base,
            "metric": key,
            "unit": unit,
            "higher_is_better": True,
            "value": where.number(document[key], key),
        }
        for key, unit in THROUGHPUT.items()
        if document.get(key) is not None
    ]
    extra = {
        key: document[key]
        for key in ("elapsed_time", "num_requests", "total_num_tokens")
        if document.get(key) is not None and where.number(document[key], key) >= 0
    }
    if not rows:
        raise where.error("a throughput result without requests_per_second", "requests_per_second")
    rows[0]["extra"] = extra
    return rows


def _recognises(_name: str, head: str) -> bool:
    if not head.startswith("{") or ('"results"' in head and '"key"' in head):
        return False
    return (
        '"request_throughput"' in head
        or ('"avg_latency"' in head and '"latencies"' in head)
        or ('"requests_per_second"' in head and '"elapsed_time"' in head)
    )


FORMAT = UploadFormat(
    "vllm",
    parse_vllm,
    _recognises,
    "vLLM's benchmark results: serving --save-result, latency and throughput --output-json",
)
