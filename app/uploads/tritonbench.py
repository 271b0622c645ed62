"""tritonbench's results (meta-pytorch/tritonbench ``run.py``) as result rows.

Two files, one table: ``--output`` / ``--csv`` write it as ``;`` separated text (a header
``<x_val label>;<backend>-<metric>;...``, one row per input, then an ``average`` row), and
``--output-json`` as one flat object, ``tritonbench_<op>_<mode>[x_<input>-<backend>]_<metric>``
-> value, plus ``...[<backend>]-<metric>-avg`` averages and a ``...-pass`` flag. The nightly
run's ``result.json`` wraps such objects in ``{"name", "env", "metrics"}``.

Each numeric cell becomes one row: ``model`` = the operator, ``config`` = the backend's
label, ``params`` = the input (``x_val``, as written) and tritonbench's mode (``fwd``, ``bwd``,
``fwd_bwd``, ``fwd_no_grad``; ``bwd`` and ``fwd_bwd`` are benchwatch's ``training``). The
metric keeps benchwatch's name where one means the same (``latency``, ``speedup``,
``accuracy``, ``peak_memory``...) and tritonbench's otherwise (``tflops``, ``gbps``...), each
with its unit and direction (``METRICS``). A backend's error message, written in place of a
number, gives a ``failed`` row. Averages, the pass flags, the ``average`` row and columns
that are not measurements (paths, configs, input descriptions, metrics benchwatch cannot
orient) go to ``extra``. The CSV names no operator: the file's name does (``<op>.csv`` as
``--output-dir`` writes it, ``op_<op>_*.csv`` as ``write_csv`` does, ``<op>_<mode>.csv``).

Neither file says the device: ``device=``, else the nightly ``env.device`` (an NVIDIA or AMD
GPU's name). Reading is linear and held to the caps of ``app.uploads.limits``.
"""

import csv
import io
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from app.benchmarks import vocabulary as vocab
from app.uploads import limits, reading
from app.uploads.base import Hints, Parsed, UploadError, UploadFile, UploadFormat
from app.uploads.benchmarks_json import json_safe

SUITE = "tritonbench"
MODES = ("fwd_no_grad", "fwd_bwd", "fwd", "bwd")  # longest first: name suffixes
TRAINING_MODES = frozenset({"bwd", "fwd_bwd"})
DEFAULT_MODE = "fwd"  # tritonbench's own default


@dataclass(frozen=True)
class Metric:
    """How a tritonbench metric is stored: benchwatch's name, its unit and direction."""

    name: str
    unit: str
    higher_is_better: bool


METRICS = {
    "latency": Metric("latency", "ms", False),  # triton.testing.do_bench: p50, ms
    "walltime": Metric("walltime", "ms", False),
    "cuda_time": Metric("cuda_time", "ms", False),
    "compile_time": Metric("compilation_latency", "ms", False),
    "tflops": Metric("tflops", "TFLOPS", True),
    "gbps": Metric("gbps", "GB/s", True),
    "tbps": Metric("tbps", "TB/s", True),
    "speedup": Metric("speedup", "x", True),
    "nsys_gpu_speedup": Metric("nsys_gpu_speedup", "x", True),
    "accuracy": Metric("accuracy", "", True),  # 1.0 pass, 0.0 fail
    "mem_footprint_compression_ratio": Metric("compression_ratio", "x", True),
    "gpu_peak_mem": Metric("peak_memory", "GB", False),
    "cpu_peak_mem": Metric("cpu_peak_mem", "GB", False),
}
RUN_KEYS = ("name", "github", "nvidia_gpu_states")
# "tritonbench_<name>[x_<input>-<backend>]_<metric>"; the backend's label holds no "-".
PREFIX = "tritonbench_"
TEMP_NAME = re.compile(r"^op_(.+)_[a-z0-9_]{8}$")  # write_csv's NamedTemporaryFile
SKIPPED_INPUTS = frozenset({"average", "hashes"})
SOURCES = {"machine.device": "env.device of tritonbench's nightly result (else give device=)"}


@dataclass
class _Table:
    """What one file holds, read: cells by (operator, mode, input, backend) and the rest."""

    cells: dict[tuple[str, str, str, str], dict[str, tuple[Any, str]]] = field(
        default_factory=dict
    )  # -> metric -> (value, where: "line N" or the JSON key)
    inputs: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


def parse_tritonbench(file: UploadFile, hints: Hints) -> Parsed:
    """Result rows of a tritonbench CSV or JSON file (or a nightly result.json)."""
    head = file.content[:64].lstrip()
    machine: dict[str, Any] = {}
    run: dict[str, Any] = {}
    if head.startswith(b"{"):
        table, env = _read_json(file)
        machine = _machine(env)
        if env:
            run["extra"] = {"tritonbench": {"env": json_safe(env)}}
    else:
        table = _read_csv(file)
    device = hints.device or machine.get("device")
    if not device:
        device = reading.required_device(file, hints, "tritonbench")
    machine["device"] = device
    results = _rows(file, table, hints)
    if table.extra:
        run.setdefault("extra", {}).setdefault("tritonbench", {}).update(json_safe(table.extra))
    return Parsed(results=results, machine=machine, run=run, sources=SOURCES)


# --- CSV -------------------------------------------------------------------------------------


def _read_csv(file: UploadFile) -> _Table:
    """The ``;`` separated table: its header, then one row per input."""
    text = reading.decode(file)
    lines = reading.text_lines(file.name, text)
    limits.check_results(file.name, len(lines) - lines.count("") - 1, what="rows")
    operator, mode = _operator_of_file(file.name)
    table = _Table()
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=";")
    header: list[str] | None = None
    try:
        for raw in reader:
            line = reader.line_num
            limits.check_deadline(file.name, line=line)
            reading.check_cells(file.name, line, raw, header)
            if not any(cell.strip() for cell in raw):
                continue
            if header is None:
                header = _check_header(file.name, line, raw)
            else:
                _add_csv_row(file.name, table, (operator, mode), header, line, raw)
    except csv.Error as error:
        raise UploadError(file.name, f"not valid CSV: {error}", line=reader.line_num) from None
    if header is None:
        raise UploadError(file.name, "the file has no header line")
    return table


def _operator_of_file(name: str) -> tuple[str, str]:
    """``layer_norm.csv`` -> (layer_norm, fwd); ``op_gemm_k3j2h1xz.csv``; ``rope_bwd.csv``."""
    stem = PurePosixPath(name.replace("\\", "/")).stem
    if match := TEMP_NAME.match(stem):
        stem = match.group(1)
    return _split_mode(stem)


def _split_mode(benchmark: str) -> tuple[str, str]:
    """``layer_norm_fwd_bwd`` -> (layer_norm, fwd_bwd); a name without a mode is ``fwd``."""
    for mode in MODES:
        if benchmark.endswith(f"_{mode}") and len(benchmark) > len(mode) + 1:
            return benchmark[: -len(mode) - 1], mode
    return benchmark, DEFAULT_MODE


def _check_header(file: str, line: int, raw: list[str]) -> list[str]:
    """The columns: the input's label, then ``<backend>-<metric>`` (or an input's metric)."""
    header = [cell.strip() for cell in raw]
    while header and not header[-1]:
        header.pop()
    if len(header) < 2 or not any("-" in column for column in header[1:]):
        message = "expected tritonbench's header: <input>;<backend>-<metric>;..."
        raise UploadError(file, message, line=line)
    seen: set[str] = set()
    for index, column in enumerate(header):
        limits.check_name(file, column, line=line, field=f"column {index + 1}")
        if index and (not column or column in seen):
            raise UploadError(file, "a column is empty or appears twice", line=line, field=column)
        seen.add(column)
    return header


def _add_csv_row(
    file: str, table: _Table, op: tuple[str, str], header: list[str], line: int, raw: list[str]
) -> None:
    cells = [cell.strip() for cell in raw]
    while len(cells) > len(header) and not cells[-1]:
        cells.pop()
    if len(cells) > len(header):
        message = f"{len(cells)} cells, but the header has {len(header)} columns"
        raise UploadError(file, message, line=line)
    x_val = cells[0]
    if not x_val:
        raise UploadError(file, "the input (first cell) is empty", line=line, field=header[0])
    for column, cell in zip(header[1:], cells[1:], strict=False):
        if cell:
            backend, _, metric = column.partition("-")
            _file_cell(file, table, (*op, x_val, backend), metric, cell, f"line {line}")


# --- JSON ------------------------------------------------------------------------------------


def _read_json(file: UploadFile) -> tuple[_Table, dict[str, Any]]:
    """``--output-json``'s flat object, or the nightly ``{"name", "env", "metrics"}``."""
    document = reading.load_json(file)
    if not isinstance(document, dict):
        raise UploadError(file.name, "expected a JSON object of tritonbench metrics")
    env: dict[str, Any] = {}
    metrics = document
    if isinstance(document.get("metrics"), dict):
        metrics = document["metrics"]
        env = document["env"] if isinstance(document.get("env"), dict) else {}
    limits.check_results(file.name, len(metrics), what="metrics")
    table = _Table()
    for key in RUN_KEYS:
        if metrics is not document and key in document:
            table.extra[key] = document[key]
    for index, (key, value) in enumerate(metrics.items()):
        limits.check_deadline(file.name, record=index)
        limits.check_name(file.name, key, field=key[:120])
        _add_json_metric(file.name, table, key, value)
    return table, env


def _add_json_metric(file: str, table: _Table, key: str, value: Any) -> None:
    """One key: a cell, an average, a pass flag; anything else is refused."""
    if not key.startswith(PREFIX):
        raise UploadError(file, "not a tritonbench metric (tritonbench_<op>...)", field=key[:120])
    if key.endswith("-pass") or key.endswith("-avg"):
        table.extra.setdefault("aggregates", {})[key[len(PREFIX) :]] = value
        return
    start = key.find("[x_")
    end = key.rfind("]_")
    if start < 0 or end < start:
        message = "expected tritonbench_<op>_<mode>[x_<input>-<backend>]_<metric>"
        raise UploadError(file, message, field=key[:120])
    x_val, dash, backend = key[start + 3 : end].rpartition("-")
    if not dash or not x_val or not backend:
        message = "expected [x_<input>-<backend>] in the name"
        raise UploadError(file, message, field=key[:120])
    if value is not None:
        operator, mode = _split_mode(key[len(PREFIX) : start])
        _file_cell(file, table, (operator, mode, x_val, backend), key[end + 2 :], value, key)


# --- rows ------------------------------------------------------------------------------------


def _file_cell(
    file: str,
    table: _Table,
    case: tuple[str, str, str, str],
    metric: str,
    value: Any,
    where: str,
) -> None:
    """A measurement under its case; an input's own metric (no backend) with the input."""
    operator, mode, x_val, backend = case
    if x_val in SKIPPED_INPUTS:
        return
    if not metric:  # x_only metrics (hw_roofline...): the input's, shown once per row
        table.inputs.setdefault((operator, mode, x_val), {})[backend] = value
        return
    cells = table.cells.setdefault(case, {})
    if metric in cells:
        line, field = _where(where, f"{backend}-{metric}")
        message = f"input {x_val[:40]!r} appears twice ({cells[metric][1][:60]})"
        raise UploadError(file, message, line=line, field=field)
    cells[metric] = (value, where)


def _rows(file: UploadFile, table: _Table, hints: Hints) -> list[dict[str, Any]]:
    """One row per known metric of each (operator, mode, input, backend)."""
    results: list[dict[str, Any]] = []
    for (operator, mode, x_val, backend), metrics in table.cells.items():
        limits.check_deadline(file.name)
        base = _base(file.name, hints, (operator, mode, x_val, backend), metrics)
        other: dict[str, Any] = {}
        rows = []
        for name, (value, where) in metrics.items():
            known = METRICS.get(name)
            row = _row(file.name, base, known, value, where, name) if known else None
            if row is None:
                other[name] = value
            else:
                rows.append(row)
        if rows and (other or (operator, mode, x_val) in table.inputs):
            rows[0]["extra"] = json_safe(
                {"metrics": other, "input": table.inputs.get((operator, mode, x_val), {})}
            )
        results += rows
        limits.check_results(file.name, len(results))
    return results


def _base(
    file: str, hints: Hints, case: tuple[str, str, str, str], metrics: dict[str, tuple[Any, str]]
) -> dict[str, Any]:
    operator, mode, x_val, backend = case
    where = next(iter(metrics.values()))[1]
    line, field = _where(where, f"{backend}-{next(iter(metrics))}")
    if not operator:
        raise UploadError(file, "no operator in the name", line=line, field=field)
    if len(operator) > 256:
        raise UploadError(file, "an operator name over 256 characters", line=line, field=field)
    config = backend  # the backend is the config: a config= hint would merge them
    if len(config) > 128 or not vocab.NAME_PATTERN.match(config):
        message = f"backend {backend[:40]!r} is no config name (letters, digits, _ . : + -)"
        raise UploadError(file, message, line=line, field=field)
    return {
        "suite": hints.suite or SUITE,
        "model": operator,
        "mode": hints.mode or ("training" if mode in TRAINING_MODES else "inference"),
        "precision": hints.precision or "fp32",
        "config": config,
        "params": {"input": x_val, "op_mode": mode},
    }


def _row(
    file: str, base: dict[str, Any], known: Metric, value: Any, where: str, name: str
) -> dict[str, Any] | None:
    """A measurement, or a failure (tritonbench writes the error where the number would be)."""
    line, field = _where(where, f"{base['config']}-{name}")
    row = {**base, "metric": known.name, "unit": known.unit}
    row["higher_is_better"] = known.higher_is_better
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        message = f"expected a number, got {type(value).__name__}"
        raise UploadError(file, message, line=line, field=field)
    if isinstance(value, str):
        number = reading.cell_number(file, value, line=line, field=field)
        if number is None:
            return {**row, "status": "failed", "reason": value.strip()[: reading.MAX_TEXT]}
        value = number
    return {**row, "value": reading.finite(file, value, field=field, line=line, minimum=None)}


def _where(where: str, column: str) -> tuple[int | None, str]:
    """(line, field) of a CSV cell ("line N", its column) or a JSON key (no line, the key)."""
    if where.startswith("line "):
        return int(where[5:]), column
    return None, where[:120]


def _machine(env: dict[str, Any]) -> dict[str, Any]:
    """The device and its name from the nightly run's ``env.device`` (a GPU's name)."""
    name = env.get("device")
    if not isinstance(name, str) or not name or name == "unknown":
        return {}
    machine = {"arch": name[:256]}
    lowered = name.lower()
    if "nvidia" in lowered:
        machine["device"] = "cuda"
    elif "amd" in lowered or "instinct" in lowered:
        machine["device"] = "rocm"
    return machine


_CSV_COLUMN = re.compile(r"[A-Za-z0-9_.]{1,256}-[a-z_]{1,64}")
_JSON_KEY = re.compile(r'"tritonbench_[^"\n]{1,300}\[')


def _recognises(name: str, head: str) -> bool:
    """A ``;`` header with a ``<backend>-<metric>`` column, or tritonbench_ JSON keys."""
    if head.startswith("{"):
        return _JSON_KEY.search(head) is not None
    columns = head.split("\n", 1)[0][:4096].strip().split(";")
    return len(columns) > 1 and any(_CSV_COLUMN.fullmatch(c) for c in columns[1:])


FORMAT = UploadFormat(
    "tritonbench",
    parse_tritonbench,
    _recognises,
    "tritonbench's --output CSV and --output-json results (and its nightly result.json)",
)
