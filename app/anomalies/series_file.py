"""Read one series from a file for ``benchwatch detect FILE``: CSV or a JSON list.

CSV: a ``value`` column (blank, ``nan`` or ``null`` is a missing point) and an optional
``timestamp`` column (ISO 8601; rows are put in time order). JSON: a list of numbers, where
``null`` is a missing point. Errors name the file, line or index, and what was wrong.
"""

import csv
import io
import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

MISSING = {"", "nan", "null", "none", "na"}


class SeriesFileError(ValueError):
    """The file does not hold a series benchwatch can read."""


@dataclass(frozen=True)
class SeriesFile:
    """Values in time order (NaN: missing) and, when the file had them, their timestamps."""

    values: list[float]
    timestamps: list[str] | None


def read_series(path: Path) -> SeriesFile:
    """Parse ``path`` by its content: JSON if it starts with ``[``, CSV otherwise."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise SeriesFileError(f"{path}: cannot read: {exc}") from exc
    if text.lstrip().startswith(("[", "{")):
        return SeriesFile(_json_values(path, text), None)
    return _csv_series(path, text)


def _json_values(path: Path, text: str) -> list[float]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SeriesFileError(f"{path}: invalid JSON at line {exc.lineno}: {exc.msg}") from exc
    if not isinstance(data, list):
        raise SeriesFileError(f"{path}: expected a JSON list of numbers")
    values = []
    for index, item in enumerate(data):
        if item is None:
            values.append(math.nan)
        elif isinstance(item, int | float) and not isinstance(item, bool):
            values.append(_finite(path, float(item), f"index {index}"))
        else:
            raise SeriesFileError(f"{path}: index {index}: {item!r} is not a number or null")
    return values


def _csv_series(path: Path, text: str) -> SeriesFile:
    reader = csv.DictReader(io.StringIO(text))
    fields = [f.strip().lower() for f in reader.fieldnames or []]
    if "value" not in fields:
        raise SeriesFileError(f"{path}: line 1: no 'value' column (columns: {fields or 'none'})")
    reader.fieldnames = fields
    rows = []
    for row in reader:
        line = reader.line_num
        raw = (row.get("value") or "").strip()
        value = math.nan if raw.lower() in MISSING else _number(path, raw, line)
        stamp = (row.get("timestamp") or "").strip() if "timestamp" in fields else None
        if stamp is not None:
            _timestamp(path, stamp, line)
        rows.append((stamp, value))
    if "timestamp" in fields:
        rows.sort(key=lambda r: _timestamp(path, r[0] or "", 0))
        return SeriesFile([v for _, v in rows], [s or "" for s, _ in rows])
    return SeriesFile([v for _, v in rows], None)


def _number(path: Path, raw: str, line: int) -> float:
    try:
        return _finite(path, float(raw), f"line {line}")
    except ValueError as exc:
        if isinstance(exc, SeriesFileError):
            raise
        raise SeriesFileError(f"{path}: line {line}: value {raw!r} is not a number") from exc


def _finite(path: Path, value: float, where: str) -> float:
    if not math.isfinite(value):
        raise SeriesFileError(f"{path}: {where}: {value} is not a finite number")
    return value


def _timestamp(path: Path, raw: str, line: int) -> datetime:
    try:
        stamp = datetime.fromisoformat(raw)
    except ValueError as exc:
        raise SeriesFileError(f"{path}: line {line}: timestamp {raw!r} is not ISO 8601") from exc
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)  # naive: taken as UTC
