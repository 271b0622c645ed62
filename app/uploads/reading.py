"""What the tritonbench, vLLM, torch.utils.benchmark and github-action-benchmark readers share.

A JSON file (or JSON lines) within the caps, a separated text file within the caps, numbers
as the native payload takes them, and the device a file does not name. Every check is linear
in what it reads and names the file, the record or line, and the field.
"""

import json
import math
import re
from typing import Any, get_args

from app.benchmarks import vocabulary as vocab
from app.uploads import limits
from app.uploads.base import Hints, OverLimit, UploadError, UploadFile

_DEVICES = get_args(vocab.Device)
DEVICES = f"{', '.join(_DEVICES[:-1])} or {_DEVICES[-1]}"  # for errors: "cuda, ..., cpu or mps"
# A decimal number. One way to read each digit: ``\d+\.?\d*`` has as many as there are digits
# before a bad character, so a long cell that does not match backtracks in time quadratic in
# its length.
NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
NON_FINITE = frozenset({"nan", "+nan", "-nan", "inf", "+inf", "-inf", "infinity", "-infinity"})
NEWLINE = re.compile(r"\r\n|\r|\n")
MAX_TEXT = 4000  # a reason or a free-text field kept in extra


def load_json(file: UploadFile) -> Any:
    """The file's JSON document within the caps; UploadError with the line when it is not JSON."""
    try:
        return limits.parse_json(file.name, file.content)
    except json.JSONDecodeError as error:
        raise UploadError(file.name, f"invalid JSON: {error.msg}", line=error.lineno) from error
    except UnicodeDecodeError as error:
        raise UploadError(file.name, f"not UTF-8 text: {error.reason}") from error


def load_json_lines(file: UploadFile) -> list[tuple[int | None, Any]]:
    """One JSON document, or JSON lines (one document a line): each with its line (or None)."""
    text = decode(file)
    limits.check_json_text(file.name, text)
    try:
        return [(None, limits.parse_json(file.name, text, checked=True))]
    except json.JSONDecodeError as error:
        if error.msg != "Extra data":
            raise UploadError(file.name, f"invalid JSON: {error.msg}", line=error.lineno) from None
    lines = text.split("\n")
    if len(lines) > limits.MAX_LINES:
        raise OverLimit(file.name, f"more than {limits.MAX_LINES} lines; split the file")
    documents: list[tuple[int | None, Any]] = []
    for number, line in enumerate(lines, start=1):
        limits.check_deadline(file.name, line=number)
        if line.strip():
            try:
                documents.append((number, limits.parse_json(file.name, line, checked=True)))
            except json.JSONDecodeError as error:
                message = f"invalid JSON: {error.msg}"
                raise UploadError(file.name, message, line=number) from None
    return documents


def decode(file: UploadFile) -> str:
    """The file's text: UTF-8 (a BOM tolerated), without NUL characters."""
    try:
        text = file.content.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = file.content[: error.start].count(b"\n") + 1
        message = f"not UTF-8 text (byte 0x{file.content[error.start]:02x})"
        raise UploadError(file.name, message, line=line) from None
    limits.check_text(file.name, text)
    return text


def text_lines(file: str, text: str) -> list[str]:
    """The lines of a text file, each within MAX_CSV_LINE_CHARS, at most MAX_LINES of them."""
    # Counted before the text is split: a file of newlines would make as many strings.
    if text.count("\n") + text.count("\r") - text.count("\r\n") >= limits.MAX_LINES:
        raise OverLimit(file, f"more than {limits.MAX_LINES} lines; split the file")
    lines = NEWLINE.split(text) if "\r" in text else text.split("\n")
    lengths = list(map(len, lines))
    if lengths and (longest := max(lengths)) > limits.MAX_CSV_LINE_CHARS:
        message = f"a line of {longest} characters; at most {limits.MAX_CSV_LINE_CHARS}"
        raise OverLimit(file, message, line=lengths.index(longest) + 1)
    return lines


def check_cells(file: str, line: int, cells: list[str], header: list[str] | None) -> None:
    """At most MAX_COLUMNS cells, none longer than MAX_CELL_CHARS (before any is read)."""
    if len(cells) > limits.MAX_COLUMNS:
        message = f"{len(cells)} cells; at most {limits.MAX_COLUMNS} columns"
        raise OverLimit(file, message, line=line)
    if cells and max(map(len, cells)) > limits.MAX_CELL_CHARS:
        index = next(i for i, cell in enumerate(cells) if len(cell) > limits.MAX_CELL_CHARS)
        column = header[index] if header and index < len(header) else f"column {index + 1}"
        message = f"a cell of {len(cells[index])} characters; at most {limits.MAX_CELL_CHARS}"
        raise OverLimit(file, message, line=line, field=column)


def cell_number(file: str, cell: str, *, line: int | None, field: str) -> float | None:
    """A decimal cell as a float; None when it is no number (text); 422 when not finite."""
    if cell.strip().lower() in NON_FINITE:
        raise UploadError(file, f"{cell.strip()!r} is not a finite number", line=line, field=field)
    if not NUMBER.fullmatch(cell.strip()):
        return None
    if math.isinf(value := float(cell)):
        message = f"{cell.strip():.24} is out of range (overflows to infinity)"
        raise UploadError(file, message, line=line, field=field)
    return value


def is_number(value: Any) -> bool:
    """A JSON number (not a boolean)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def finite(
    file: str,
    value: Any,
    *,
    field: str,
    record: int | None = None,
    line: int | None = None,
    minimum: float | None = 0.0,
) -> float:
    """A finite number (>= ``minimum`` unless None), or UploadError naming where it was."""
    if not is_number(value):
        message = f"expected a number, got {_kind(value)}"
        raise UploadError(file, message, record=record, line=line, field=field)
    if isinstance(value, int) and not limits.INT64_MIN <= value <= limits.INT64_MAX:
        message = "a whole number that does not fit in 64 bits"
        raise UploadError(file, message, record=record, line=line, field=field)
    number = float(value)
    if not math.isfinite(number):
        message = f"{number} is not a finite number"
        raise UploadError(file, message, record=record, line=line, field=field)
    if minimum is not None and number < minimum:
        message = f"{number:g} is less than {minimum:g}"
        raise UploadError(file, message, record=record, line=line, field=field)
    return number


def text(
    file: str,
    value: Any,
    *,
    field: str,
    record: int | None = None,
    line: int | None = None,
    limit: int = limits.MAX_NAME_CHARS,
) -> str:
    """A non-empty string of at most ``limit`` characters."""
    if not isinstance(value, str) or not value.strip():
        message = f"expected a non-empty string, got {_kind(value)}"
        raise UploadError(file, message, record=record, line=line, field=field)
    if len(value) > limit:
        message = f"a text of {len(value)} characters; at most {limit}"
        raise OverLimit(file, message, record=record, line=line, field=field)
    return value


def required_device(file: UploadFile, hints: Hints, tool: str) -> str:
    """The ``device`` hint: ``tool``'s files do not say which device they measured."""
    if hints.device:
        return hints.device
    message = f"{tool} does not write the device it measured on; give device= ({DEVICES})"
    raise UploadError(file.name, message, field="device")


def _kind(value: Any) -> str:
    """What a value is, for an error (never its repr: a hostile value may be huge or deep)."""
    if isinstance(value, str):
        return repr(value[:40]) + ("..." if len(value) > 40 else "")
    if is_number(value):
        return "a number"
    return {dict: "an object", list: "a list", bool: "a boolean", type(None): "null"}.get(
        type(value), type(value).__name__
    )
