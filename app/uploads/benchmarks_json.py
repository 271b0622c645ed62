"""Reading the JSON files that keep a ``benchmarks`` list (pytest-benchmark, Google Benchmark)."""

import json
import math
from datetime import datetime
from typing import Any

from app.core import bounds
from app.uploads import limits
from app.uploads.base import UploadError, UploadFile


def load_document(file: UploadFile) -> dict[str, Any]:
    """The file's top-level JSON object; UploadError with the line when it is not JSON."""
    try:
        document = limits.parse_json(file.name, file.content)
    except json.JSONDecodeError as error:
        raise UploadError(file.name, f"invalid JSON: {error.msg}", line=error.lineno) from error
    except UnicodeDecodeError as error:
        raise UploadError(file.name, f"not UTF-8 text: {error.reason}") from error
    if not isinstance(document, dict):
        raise UploadError(file.name, "expected a JSON object with a 'benchmarks' list")
    return document


def benchmark_entries(file: UploadFile, document: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``benchmarks`` list, each entry an object."""
    entries = document.get("benchmarks")
    if not isinstance(entries, list):
        raise UploadError(file.name, "expected a 'benchmarks' list", field="benchmarks")
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise UploadError(
                file.name, "a benchmark must be a JSON object", record=index, field=at(index, "")
            )
    return entries


def json_safe(value: Any) -> Any:
    """Free-form JSON as the ingest takes it: NaN and infinities become strings."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_safe(v) for v in value]
    return value


def at(index: int, path: str) -> str:
    """The dotted path of a field of the index-th benchmark."""
    return f"benchmarks[{index}].{path}" if path else f"benchmarks[{index}]"


def moment(file: UploadFile, value: Any, field: str) -> datetime | None:
    """An ISO 8601 date and time, or None when the value is not one.

    UploadError when it is one, but not a time from 1970 to 2999 (as a run's time must be).
    """
    if not isinstance(value, str):
        return None
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        return None
    if not limits.in_time_range(at):
        message = f"{value!r:.40} is not a time from 1970 to {bounds.LATEST.year - 1}"
        raise UploadError(file.name, message, field=field)
    return at
