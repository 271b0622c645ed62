"""PyTorch ``benchmarks/dynamo`` CSVs (upload format ``torchbench-csv``).

One reader for three kinds of file, told apart by their header rather than their name:

* ``*_performance.csv``: ``dev,name,batch_size,speedup,abs_latency,compilation_latency,...``
* ``*_accuracy.csv``: ``dev,name,batch_size,accuracy,calls_captured,unique_graphs,...``
* ``ci_expected_accuracy/*.csv``: ``name,accuracy,graph_breaks``, blank lines between rows.

Each numeric cell becomes one result named after its column; an ``accuracy`` cell becomes an
``accuracy`` result with a ``text_value``. The suite, compiler config, precision, mode and
device come from the file name (``read_file_name``) unless ``Hints`` give them.

``common.py`` writes a model that failed as a placeholder row (``write_csv_when_exception``:
batch size 0, speedup 0, abs_latency 0) and pads short rows with ``"0"`` (``output_csv``).
Those zeros are not measurements: they become ``failed`` results or are left out.

Reading is linear in the file and held to the caps of ``app.uploads.limits``: lines, line
length, cells per row, cell length, results per file, and the parse deadline between rows.
"""

import csv
import io
import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from app.benchmarks import vocabulary as vocab
from app.uploads import limits, reading
from app.uploads.base import Hints, Parsed, UploadError, UploadFile, UploadFormat
from app.uploads.pytorch_ci import (
    DEVICES,
    FAILURE_METRICS,
    MODES,
    SUITES,
    FileNameFacts,
    backend_config,
    read_file_name,
)

# Columns that say which case a row is, not what was measured.
KEY_COLUMNS = frozenset({"dev", "name", "batch_size", "tag"})
# --baseline columns: common.py writes 0 for both when the baseline has no such model.
BASELINE_METRICS = {"baseline": "x", "speedup_vs_baseline": "x"}
DIGITS = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class _Case:
    """The fields every result of one file shares."""

    suite: str
    config: str
    precision: str
    mode: str


def parse_torchbench(file: UploadFile, hints: Hints) -> Parsed:
    """Results of a ``benchmarks/dynamo`` performance, accuracy or expected-accuracy CSV."""
    _refuse_targets(file)
    rows = _read_table(file.name, _decode(file))
    facts = read_file_name(file.name)
    device = _device(file.name, hints, facts, {row["dev"] for _, row in rows if row.get("dev")})
    case = _case(file.name, hints, facts, device)
    results: list[dict[str, Any]] = []
    for line, row in rows:
        limits.check_deadline(file.name, line=line)
        results += _row_results(file.name, line, row, case)
        limits.check_results(file.name, len(results), line=line)
    machine: dict[str, Any] = {"device": device} if device else {}
    if facts.arch and not hints.device:
        machine["arch"] = facts.arch
    # The file names no machine: dynamo's CSVs say only the device (and arch), in the name.
    sources = {"machine.device": "the file name" if facts.device else "the dev column"}
    sources["machine.arch"] = "the file name"
    return Parsed(results=results, machine=machine, sources=sources)


# benchmarks/dynamo files that hold what CI expects (targets), not what a run measured.
TARGET_FILES = ("expected_ci_speedup_", "pr_time_benchmarks_expected_results")


def _refuse_targets(file: UploadFile) -> None:
    base = PurePosixPath(file.name).name.lower()
    if base.startswith(TARGET_FILES):
        raise UploadError(
            file.name,
            "this file holds CI's expected targets (speedup or instruction-count goals), not "
            "results; upload the *_performance.csv / *_accuracy.csv a benchmark run writes",
        )


def _decode(file: UploadFile) -> str:
    """The file's text; benchmarks/dynamo writes UTF-8 (a BOM is tolerated)."""
    if file.content.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise UploadError(file.name, "the file is UTF-16; save it as UTF-8")
    try:
        return file.content.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = file.content[: exc.start].count(b"\n") + 1
        byte = file.content[exc.start]
        raise UploadError(
            file.name, f"not UTF-8 text (byte 0x{byte:02x} at offset {exc.start})", line=line
        ) from None


def _read_table(file: str, text: str) -> list[tuple[int, dict[str, str]]]:
    """The data rows by column, with 1-based line numbers; blank and ``#`` lines skipped."""
    limits.check_text(file, text)
    _check_lines(file, text)
    reader = csv.reader(io.StringIO(text, newline=""))
    header: list[str] | None = None
    rows: list[tuple[int, dict[str, str]]] = []
    try:
        for raw in reader:
            limits.check_deadline(file, line=reader.line_num)
            reading.check_cells(file, reader.line_num, raw, header)
            cells = [cell.strip() for cell in raw]
            if not any(cells) or cells[0].startswith("#"):
                continue
            if header is None:
                header = _check_header(file, reader.line_num, cells)
            else:
                rows.append((reader.line_num, _row_cells(file, reader.line_num, header, cells)))
    except csv.Error as exc:
        raise UploadError(file, f"not valid CSV: {exc}", line=reader.line_num) from None
    if header is None:
        raise UploadError(file, "the file has no header line (one with a 'name' column)")
    return rows


def _check_lines(file: str, text: str) -> None:
    """At most MAX_LINES lines, none longer than MAX_CSV_LINE_CHARS; rows within the cap.

    The csv module splits a whole row into cells before any of them can be looked at: the
    line length bounds how many it makes. A file may have as many data rows as results;
    they are counted here, before any is read (blank lines do not count).
    """
    lines = reading.text_lines(file, text)
    limits.check_results(file, len(lines) - lines.count("") - 1, what="rows")  # less the header


def _check_header(file: str, line: int, cells: list[str]) -> list[str]:
    """The column names, each present once and none empty."""
    while cells and not cells[-1]:
        cells.pop()
    seen: set[str] = set()
    for index, column in enumerate(cells):
        if not column:
            raise UploadError(file, f"column {index + 1} of the header has no name", line=line)
        limits.check_name(file, column, line=line, field=f"column {index + 1}")
        if column in seen:
            raise UploadError(file, "the column appears twice", line=line, field=column)
        seen.add(column)
    if "name" not in cells:
        raise UploadError(file, "the header has no 'name' column", line=line, field="name")
    return cells


def _row_cells(file: str, line: int, header: list[str], cells: list[str]) -> dict[str, str]:
    """One row by column; cells missing at the end of a short row read as empty."""
    while len(cells) > len(header) and not cells[-1]:
        cells.pop()
    if len(cells) > len(header):
        message = f"{len(cells)} cells, but the header has {len(header)} columns"
        raise UploadError(file, message, line=line)
    return dict(zip(header, cells + [""] * (len(header) - len(cells)), strict=True))


def _device(file: str, hints: Hints, facts: FileNameFacts, devs: set[str]) -> str | None:
    """Hints, else the file name, else the ``dev`` column when all rows agree on a known one."""
    if hints.device is not None:
        if hints.device not in DEVICES:
            known = ", ".join(sorted(DEVICES))
            message = f"unknown device {hints.device!r}; one of {known}"
            raise UploadError(file, message, field="device")
        return hints.device
    if facts.device is not None:
        return facts.device
    if len(devs) > 1:
        message = f"the rows name several devices ({', '.join(sorted(devs))}); give device="
        raise UploadError(file, message, field="dev")
    return next((dev for dev in devs if dev in DEVICES), None)


def _case(file: str, hints: Hints, facts: FileNameFacts, device: str | None) -> _Case:
    """Suite, config, precision and mode: hints win over the file name; none may be missing."""
    suite = SUITES.get(hints.suite, hints.suite) if hints.suite else facts.suite
    config = vocab.canonical_config(hints.config) if hints.config else None
    if config is None and facts.backend:
        config = backend_config(facts.backend, device)
    precision = facts.precision
    if hints.precision is not None:
        precision = vocab.canonical_precision(hints.precision)
        if precision is None:
            known = ", ".join(vocab.PRECISIONS)
            message = f"unknown precision {hints.precision!r}; one of {known}"
            raise UploadError(file, message, field="precision")
    mode = hints.mode or facts.mode
    if mode is not None and mode not in MODES:
        raise UploadError(file, f"unknown mode {mode!r}; training or inference", field="mode")
    if config is not None and not vocab.NAME_PATTERN.match(config):
        raise UploadError(file, "config must be letters, digits and _ . : + -", field="config")
    given = {"suite": suite, "config": config, "precision": precision, "mode": mode}
    missing = [name for name, value in given.items() if not value]
    if missing:
        wanted = ", ".join(f"{name}=" for name in missing)
        message = f"cannot tell the {', '.join(missing)} from the file name; give {wanted}"
        raise UploadError(file, message, field=missing[0])
    return _Case(**{name: str(value) for name, value in given.items()})


def _row_results(file: str, line: int, row: dict[str, str], case: _Case) -> list[dict[str, Any]]:
    """The results of one CSV row: accuracy text, measurements, or failures."""
    if not row["name"]:
        raise UploadError(file, "the model name is empty", line=line, field="name")
    batch_size = _batch_size(file, line, row.get("batch_size", ""))
    base: dict[str, Any] = {
        "suite": case.suite,
        "model": row["name"],
        "mode": case.mode,
        "precision": case.precision,
        "config": case.config,
        # 0 is write_csv_when_exception's placeholder, not a batch size
        "batch_size": batch_size or None,
    }
    if row.get("tag"):
        base["params"] = {"tag": row["tag"]}
    results: list[dict[str, Any]] = []
    if row.get("accuracy"):
        results.append({**base, "metric": "accuracy", "text_value": row["accuracy"]})
    values = {
        column: _number(file, line, column, cell)
        for column, cell in row.items()
        if cell and column not in KEY_COLUMNS and column != "accuracy"
    }
    if (reason := _failure(values, batch_size)) is not None:
        failed = [m for m in FAILURE_METRICS if m in values]
        return results + [
            {**base, "metric": m, "status": "failed", "reason": reason} for m in failed
        ]
    if batch_size == 0:
        return results  # an exception row: its other cells are output_csv's "0" padding
    return results + [
        _measurement(base, metric, value)
        for metric, value in values.items()
        if not (metric in BASELINE_METRICS and value == 0)
    ]


def _failure(values: dict[str, float], batch_size: int | None) -> str | None:
    """Why a performance row is a failure (its speedup or latency is 0), or None."""
    present = [metric for metric in FAILURE_METRICS if metric in values]
    zeros = [metric for metric in present if values[metric] == 0]
    if zeros:
        written = " and ".join(f"{metric} 0" for metric in zeros)
        return f"{written}: the model failed to run (benchmarks/dynamo writes 0 for a failure)"
    if present and batch_size == 0:
        return "batch_size 0: the model failed to run (benchmarks/dynamo's placeholder row)"
    return None


def _measurement(base: dict[str, Any], metric: str, value: float) -> dict[str, Any]:
    """One numeric result; a column that is not a well-known metric gets a unit and direction."""
    result = {**base, "metric": metric, "value": value}
    if metric in BASELINE_METRICS:
        result.update(unit=BASELINE_METRICS[metric], higher_is_better=True)
    elif vocab.canonical_metric(metric) not in vocab.WELL_KNOWN_METRICS:
        # benchmarks/dynamo's other columns are costs (latencies, memory, counters); the
        # ones where more is better (speedup, compression_ratio) are well known.
        result.update(unit="", higher_is_better=False)
    return result


def _batch_size(file: str, line: int, cell: str) -> int | None:
    """The batch size, None when the column is absent or the cell empty."""
    if not cell:
        return None
    if not DIGITS.fullmatch(cell):
        message = f"batch_size must be a whole number >= 0, not {cell!r:.40}"
        raise UploadError(file, message, line=line, field="batch_size")
    return limits.check_int32(file, int(cell), line=line, field="batch_size")


def _number(file: str, line: int, column: str, cell: str) -> float:
    """A finite decimal number (no NaN, Infinity or ``1_000``)."""
    decimal = reading.NUMBER.fullmatch(cell)  # first: "nan" is not a number here, not non-finite
    value = reading.cell_number(file, cell, line=line, field=column) if decimal else None
    if value is None:
        raise UploadError(file, f"not a number: {cell!r:.40}", line=line, field=column)
    return value


def _recognises(name: str, head: str) -> bool:
    """A CSV by its name, or a first line of commas that is not JSON."""
    return name.endswith(".csv") or (head[:1] not in ("[", "{") and "," in head.split("\n", 1)[0])


FORMAT = UploadFormat(
    "torchbench-csv",
    parse_torchbench,
    _recognises,
    "PyTorch benchmarks/dynamo CSVs (performance, accuracy, compile time, memory)",
)
