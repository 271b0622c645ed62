"""PyTorch's OSS benchmark-database records (schema "v3") as native result rows.

A file holds what pytorch/test-infra's ``upload_benchmark_results.py`` accepts: a JSON list of
records, one record object, or JSON lines where each line is a record or a list of records.
Each record (``benchmark``, ``model``, ``metric``; optional ``runners`` and ``dependencies``;
in stored rows also the CI metadata) becomes exactly one result row, so ``results[i]`` of the
ingest is record ``i`` of the file; the runners, dependencies and CI metadata become the run's
machine, environment and run fields (``pytorch_ci``, with the CI vocabulary torchbench-csv
uses too). The rules are in docs/formats.md ("pytorch-v3"). Unlike the upstream uploader,
which skips what it cannot read, a bad record rejects the file with its
record index, line and field. Reading is held to the caps of ``app.uploads.limits`` (JSON
depth and size, records per file, values per record) and to the parse deadline.
"""

import json
import math
import re
import statistics
from typing import Any

from app.benchmarks import vocabulary as vocab
from app.core import bounds
from app.uploads import limits
from app.uploads.base import Hints, OverLimit, Parsed, UploadError, UploadFile, UploadFormat
from app.uploads.pytorch_ci import (
    FAILURE_METRICS,
    RUN_KEYS,
    SOURCES,
    Located,
    backend_config,
    device_source,
    environment_fields,
    json_object,
    machine_fields,
    machine_name,
    read_file_name,
    run_fields,
)

# benchmarks/dynamo (common.py output_json) writes the rows of its CSVs as records named
# "TorchInductor", the suite in model.origins and the CSV in extra_info.output. They are read
# as the torchbench-csv format reads those CSVs, so both land in the same series.
DYNAMO_BENCHMARK = "TorchInductor"
_MODES = dict.fromkeys(("training", "train"), "training") | dict.fromkeys(
    ("inference", "infer", "eval", "evaluation"), "inference"
)
# benchmark.extra_info keys that tell benchmark cases apart (-> params). Every other key is
# description (-> extra), so a changing output path or device ARN cannot split a series.
IDENTIFYING_KEYS = ("shape", "shapes", "input_shape", "input_shapes", "args", "input_config")
_UNIT_ALIASES = (("s", "sec secs seconds"), ("ms", "msec"), ("us", "usec"), ("%", "percent"))
_UNIT_BY_LOWER = {unit.lower(): unit for unit in vocab.UNITS} | {
    alias: unit for unit, aliases in _UNIT_ALIASES for alias in aliases.split()
}
_UNIT_SUFFIX = re.compile(r"\(([^()]+)\)\s*$")  # ExecuTorch: "avg_inference_latency(ms)"
_RATE = re.compile(r"(?:^|_)per_(?:s|sec|second)(?:$|_)")
_LOWER_BETTER = frozenset(
    {"latency", "time", "duration", "mem", "memory", "usage", "error", "loss", "overhead", "size"}
)
# More sparsity (block-sparse attention) means more work skipped.
_HIGHER_BETTER = frozenset(
    {"throughput", "speedup", "flops", "tflops", "gflops", "bandwidth", "qps", "sparsity"}
)
_NOT_ROW_EXTRA = frozenset(
    {"benchmark", "model", "metric", "runners", "dependencies", "timestamp", *RUN_KEYS}
)
_IDENTITY = ("suite", "model", "mode", "precision", "config", "batch_size", "params", "metric")
_NON_BLANK = re.compile(r"\S")


def parse_pytorch_v3(file: UploadFile, hints: Hints) -> Parsed:
    """Result rows, machine, environment and run fields of a v3 benchmark-record file."""
    records = read_records(file)
    if not records:
        raise UploadError(file.name, "the file holds no benchmark records")
    limits.check_results(file.name, len(records), record=limits.MAX_RESULTS_PER_FILE)
    results: list[dict[str, Any]] = []
    for located in records:
        limits.check_deadline(file.name, line=located.line, record=located.index)
        results.append(result_row(located, hints))
    _reject_duplicates(records, results)
    machine = machine_fields(records, hints)
    environment = environment_fields(records)
    where_device = device_source(records) if "device" in machine else None
    return Parsed(
        results=results,
        machine=machine,
        environment=environment,
        run=run_fields(records),
        machine_name=machine_name(records),
        sources=SOURCES
        | {f"environment.{key}": "dependencies" for key in environment}
        | ({"machine.device": where_device} if where_device else {}),
    )


# --- reading ---------------------------------------------------------------------------------


def read_records(file: UploadFile) -> list[Located]:
    """The records of a JSON document (list or object) or of JSON lines, with their lines."""
    try:
        text = file.content.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = file.content.count(b"\n", 0, exc.start) + 1
        raise UploadError(file.name, f"not UTF-8 text (byte {exc.start})", line=line) from exc
    if not text.strip():
        return []
    try:
        document = limits.parse_json(file.name, text)
    except json.JSONDecodeError as exc:
        if _first_line_is_json(file.name, text):
            return _records_of_lines(file.name, text)
        message = f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        raise UploadError(file.name, message, line=exc.lineno) from exc
    items = document if isinstance(document, list) else [document]
    return [Located(file.name, index, None, item) for index, item in enumerate(items)]


def _first_line_is_json(file: str, text: str) -> bool:
    """Whether the first non-blank line is JSON by itself: JSON lines, not a broken document."""
    start = found.start() if (found := _NON_BLANK.search(text)) else 0
    end = text.find("\n", start)
    try:
        limits.parse_json(file, text[start : None if end == -1 else end], line=1)
    except json.JSONDecodeError:
        return False
    return True


def _records_of_lines(file: str, text: str) -> list[Located]:
    """JSON lines: each line an object or a list of objects (ClickHouse JSONEachRow)."""
    if text.count("\n") >= limits.MAX_LINES:
        raise OverLimit(file, f"more than {limits.MAX_LINES} lines; split the file")
    limits.check_json_text(file, text)
    # A line that starts an object is one record: counted before any is read.
    limits.check_results(file, text.count("\n{") + text.startswith("{"), what="records")
    records: list[Located] = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        limits.check_deadline(file, line=number)
        try:
            value = limits.parse_json(file, line, line=number, checked=True)
        except json.JSONDecodeError as exc:
            message = f"invalid JSON: {exc.msg} (line {number}, column {exc.colno})"
            raise UploadError(file, message, line=number) from exc
        if not isinstance(value, dict | list):
            raise UploadError(file, "a line must be an object or a list of objects", line=number)
        for item in value if isinstance(value, list) else [value]:
            records.append(Located(file, len(records), number, item))
        limits.check_results(file, len(records), line=number)
    return records


# --- one record -> one result row ------------------------------------------------------------


def result_row(located: Located, hints: Hints) -> dict[str, Any]:
    """The native result row of one record."""
    record = located.record
    if not isinstance(record, dict):
        raise located.error("a record must be a JSON object")
    _reject_non_finite(located, record, "")
    bench, model, metric = (_section(located, name) for name in ("benchmark", "model", "metric"))
    info = json_object(located, bench.get("extra_info"), "benchmark.extra_info")
    metric_info = json_object(located, metric.get("extra_info"), "metric.extra_info")
    name = vocab.canonical_metric(_name(located, metric.get("name"), "metric.name", 128))
    row: dict[str, Any] = {
        "suite": _suite(located, bench, model, hints),
        "model": _name(located, model.get("name"), "model.name", 256),
        "mode": _mode(located, bench, hints),
        "precision": _precision(located, bench, hints),
        "config": _config(located, info, model, hints),
        "metric": name,
    }
    if (batch_size := _batch_size(located, info)) is not None:
        row["batch_size"] = batch_size
    if params := _params(info, metric_info):
        row["params"] = params
    dynamo = bench.get("name") == DYNAMO_BENCHMARK
    row |= _measurement(located, metric, metric_info, name, dynamo=dynamo)
    row["extra"] = _extra(record, row)
    return row


def _section(located: Located, name: str) -> dict[str, Any]:
    if located.record.get(name) is None:
        raise located.error(f"the record has no {name!r} object", name)
    return json_object(located, located.record[name], name)


def _name(located: Located, value: Any, field: str, max_length: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise located.error("must be a non-empty string", field)
    if len(value.strip()) > max_length:
        raise located.error(f"longer than {max_length} characters", field)
    return value.strip()


def _suite(located: Located, bench: dict[str, Any], model: dict[str, Any], hints: Hints) -> str:
    """hints.suite, else a TorchInductor record's origin (torchbench...), else benchmark.name."""
    if hints.suite:
        return hints.suite
    origins = model.get("origins")
    origin = origins[0] if isinstance(origins, list) and origins else None
    if bench.get("name") == DYNAMO_BENCHMARK and isinstance(origin, str) and origin.strip():
        return _name(located, origin, "model.origins[0]", 128)
    return _name(located, bench.get("name"), "benchmark.name", 128)


def _mode(located: Located, bench: dict[str, Any], hints: Hints) -> str:
    """hints.mode, else benchmark.mode (train/eval spellings folded), else inference."""
    if hints.mode:
        return _MODES.get(hints.mode.lower(), hints.mode)
    raw = bench.get("mode")
    if raw is None or raw == "":
        return "inference"
    if not isinstance(raw, str) or raw.strip().lower() not in _MODES:
        raise located.error(f"unknown mode {raw!r}; give mode= to say which", "benchmark.mode")
    return _MODES[raw.strip().lower()]


def _precision(located: Located, bench: dict[str, Any], hints: Hints) -> str:
    """hints.precision, else benchmark.dtype (``torch.`` prefix and aliases folded), else fp32."""
    if hints.precision:
        return vocab.canonical_precision(hints.precision) or hints.precision
    raw = bench.get("dtype")
    if raw is None or raw == "":
        return "fp32"
    name = raw.strip().removeprefix("torch.") if isinstance(raw, str) else ""
    if (precision := vocab.canonical_precision(name)) is None:
        known = ", ".join(vocab.PRECISIONS)
        message = f"unknown dtype {raw!r} (known: {known}); give precision= to say which"
        raise located.error(message, "benchmark.dtype")
    return precision


def _config(located: Located, info: dict[str, Any], model: dict[str, Any], hints: Hints) -> str:
    """hints.config, else the backend of the dynamo CSV named in ``output``, else of the model."""
    if hints.config:
        return vocab.canonical_config(hints.config)
    device = info.get("device") if isinstance(info.get("device"), str) else hints.device
    output = info.get("output")
    if isinstance(output, str) and (backend := read_file_name(output).backend):
        return _backend_config(located, backend, device, "benchmark.extra_info.output")
    for field, raw in (
        ("model.backend", model.get("backend")),
        ("benchmark.extra_info.backend", info.get("backend")),
    ):
        if raw is None or raw == "":
            continue
        config = _backend_config(located, raw, device, field)
        # the attention benchmark says backend "compiled" plus max_autotune: true
        return "max_autotune" if info.get("max_autotune") is True and config != "eager" else config
    return "eager"


def _backend_config(located: Located, raw: Any, device: str | None, field: str) -> str:
    """A backend's config name, as torchbench-csv maps it (plain inductor on CPU: default)."""
    if not isinstance(raw, str) or not vocab.NAME_PATTERN.match(raw) or len(raw) > 128:
        raise located.error(f"{raw!r} is not a config name (letters, digits, _ . : + -)", field)
    return backend_config(raw, device)


def _batch_size(located: Located, info: dict[str, Any]) -> int | None:
    value = info.get("batch_size")
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise located.error("must be a whole number >= 0", "benchmark.extra_info.batch_size")
    if value > bounds.INT32_MAX:
        message = f"{value} is too large; at most {bounds.INT32_MAX}"
        raise located.error(message, "benchmark.extra_info.batch_size")
    return value


def _params(info: dict[str, Any], metric_info: dict[str, Any]) -> dict[str, Any]:
    """What tells benchmark cases apart beyond the row's named columns."""
    params = {key: info[key] for key in IDENTIFYING_KEYS if info.get(key) not in (None, "", [])}
    if info.get("quantization"):
        params["quantization"] = info["quantization"]
    method = metric_info.get("method")
    if isinstance(method, str) and method:  # ExecuTorch: which exported method was measured
        params["method"] = method
    return params


def _measurement(
    located: Located,
    metric: dict[str, Any],
    metric_info: dict[str, Any],
    name: str,
    *,
    dynamo: bool,
) -> dict[str, Any]:
    """Value (median), samples, text value or failure, then unit and direction."""
    samples = _samples(located, metric.get("benchmark_values"))
    texts = _texts(metric_info.get("benchmark_values"))
    if dynamo and name in FAILURE_METRICS and samples and not any(samples):
        reason = f"{name} 0: the model failed to run (benchmarks/dynamo writes 0 for a failure)"
        return {"status": "failed", "reason": reason}
    out: dict[str, Any] = {}
    if samples:
        out |= {"value": statistics.median(samples), "samples": samples}
    if texts:
        out["text_value"] = texts[0]
    if not samples and not texts:
        out |= {"status": "failed", "reason": "the record has no benchmark values"}
    return out | _unit_and_direction(located, metric, metric_info, name, bool(samples), dynamo)


def _samples(located: Located, values: Any) -> list[float]:
    if values is None:
        return []
    if not isinstance(values, list):
        raise located.error("must be a list of numbers", "metric.benchmark_values")
    limits.check_samples(
        located.file, len(values), field="metric.benchmark_values", record=located.index
    )
    for i, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise located.error(f"{value!r} is not a number", f"metric.benchmark_values[{i}]")
    return [float(value) for value in values]


def _texts(values: Any) -> list[str]:
    """Strings in metric.extra_info.benchmark_values: dynamo's accuracy outcomes ("pass")."""
    items = [values] if isinstance(values, str) else values if isinstance(values, list) else []
    return [v.strip()[:256] for v in items if isinstance(v, str) and v.strip()]


def _unit_and_direction(
    located: Located,
    metric: dict[str, Any],
    metric_info: dict[str, Any],
    name: str,
    has_numbers: bool,
    dynamo: bool,
) -> dict[str, Any]:
    """The unit given (metric.unit, metric.extra_info.unit, a "(ms)" name suffix) and direction.

    A well-known metric without a unit keeps its own unit and direction. Another metric gets
    its unit (or "") and, when that unit says no direction, one from its name; the other
    benchmarks/dynamo columns are costs (as torchbench-csv reads them): lower is better.
    """
    unit = None
    for field, raw in (
        ("metric.unit", metric.get("unit")),
        ("metric.extra_info.unit", metric_info.get("unit")),
    ):
        if raw is not None and raw != "":
            unit = _unit(located, raw, field)
            break
    if unit is None and (match := _UNIT_SUFFIX.search(name)):
        unit = _UNIT_BY_LOWER.get(match[1].strip().lower())
    spec = vocab.WELL_KNOWN_METRICS.get(name)
    if spec is not None:
        return {} if unit is None else {"unit": unit}
    unit = unit or ""
    if not has_numbers or vocab.default_direction(unit) is not None:
        return {"unit": unit}
    if (higher := False if dynamo else direction_from_name(name)) is None:
        message = (
            f"{name!r} is not a well-known metric and neither its unit {unit!r} nor its name "
            "says whether higher is better"
        )
        raise located.error(message, "metric.name")
    return {"unit": unit, "higher_is_better": higher}


def _unit(located: Located, raw: Any, field: str) -> str:
    text = raw.strip() if isinstance(raw, str) else ""
    if text in vocab.UNITS:
        return text
    unit = _UNIT_BY_LOWER.get(text.lower().replace("/sec", "/s"))
    if unit is None:
        raise located.error(f"unknown unit {raw!r}", field)
    return unit


def direction_from_name(metric: str) -> bool | None:
    """Whether higher is better as the metric's name tells (its last telling word), or None."""
    lowered = metric.lower()
    if _RATE.search(lowered):
        return True
    for word in reversed(re.split(r"[^a-z0-9]+", lowered)):
        if word in _LOWER_BETTER:
            return False
        if word in _HIGHER_BETTER:
            return True
    return None


def _extra(record: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    """The record less what became row fields verbatim, so that nothing of it is lost."""
    params = row.get("params", {})
    bench = dict(record["benchmark"])
    info = {
        key: value
        for key, value in (bench.pop("extra_info", None) or {}).items()
        if key not in params or key == "method"
    }
    if "batch_size" in row:
        info.pop("batch_size", None)
    model = {key: value for key, value in record["model"].items() if key != "name"}
    metric = {k: v for k, v in record["metric"].items() if k not in ("name", "benchmark_values")}
    metric_info = dict(metric.pop("extra_info", None) or {})
    if "method" in params:
        del metric_info["method"]
    if "text_value" in row and metric_info.get("benchmark_values") in (
        [row["text_value"]],
        row["text_value"],
    ):
        del metric_info["benchmark_values"]
    sections = {
        "benchmark": bench | ({"extra_info": info} if info else {}),
        "model": model,
        "metric": metric | ({"extra_info": metric_info} if metric_info else {}),
    }
    rest = {key: value for key, value in record.items() if key not in _NOT_ROW_EXTRA}
    return rest | {name: section for name, section in sections.items() if section}


def _reject_non_finite(located: Located, value: Any, path: str) -> None:
    """NaN and Infinity, which Python's json reads, are not JSON numbers."""
    if isinstance(value, float) and not math.isfinite(value):
        raise located.error(f"{value} is not a JSON number", path or None)
    if isinstance(value, dict):
        for key, item in value.items():
            _reject_non_finite(located, item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _reject_non_finite(located, item, f"{path}[{index}]")


def _reject_duplicates(records: list[Located], results: list[dict[str, Any]]) -> None:
    """Two records of one benchmark and metric: the ingest would reject the run."""
    first: dict[str, int] = {}
    for located, row in zip(records, results, strict=True):
        key = json.dumps([row.get(k) for k in _IDENTITY], sort_keys=True)
        if (seen := first.setdefault(key, located.index)) != located.index:
            raise located.error(
                f"duplicates record {seen}: same benchmark and metric", "metric.name"
            )


def _recognises(_name: str, head: str) -> bool:
    return '"benchmark"' in head and '"metric"' in head


FORMAT = UploadFormat(
    "pytorch-v3",
    parse_pytorch_v3,
    _recognises,
    "PyTorch's v3 benchmark records (the HUD's JSON, one record a line or a list)",
)
