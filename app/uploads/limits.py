"""What one upload may cost: the caps every parser enforces, and the parse deadline.

The caps are named here, once, and listed for users in docs/limits.md. A file over a cap is
refused whole with 413 (``OverLimit``), saying where it went over: file, line or record,
field. A value that no column can hold (an integer beyond 64 bits, or beyond 32 where the
column is an INTEGER; a NUL character; a time outside 1970 to 2999; a literal that overflows
to infinity) is refused the same way with 422. Nothing is cut to fit.

Every parser is linear in its input. The caps bound what a single step may cost (the text a
regular expression scans, the rows a run holds, how deep the recursive walks over JSON go),
and the deadline bounds the whole: parsers check it between rows and records, so a file that
is merely slow to read is refused instead of holding a worker.
"""

import json
import math
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

from app.core.bounds import EARLIEST, INT32_MAX, LATEST, MAX_JSON_DEPTH
from app.runs.schemas import MAX_SAMPLES
from app.uploads.base import OverLimit, UploadError

# --- the caps ---------------------------------------------------------------------------------

MAX_CELL_CHARS = 4096  # a CSV cell; the longest real ones (model names) stay under 256
MAX_COLUMNS = 1024  # cells of a CSV row; benchmarks/dynamo writes about 20
MAX_CSV_LINE_CHARS = 1_048_576  # bounds the cells the csv module splits before any check
MAX_LINES = 1_000_000  # lines of a CSV or JSON-lines file, blank ones included
MAX_NAME_CHARS = 1024  # a test, benchmark, column or file name, as written
# Result rows one file gives (a nightly run has about 2,000); also what can be counted before
# a file is read: the data rows of a CSV, the records of JSON lines, the benchmarks of a
# pytest-benchmark file.
MAX_RESULTS_PER_FILE = 100_000
MAX_SAMPLES_PER_RESULT = MAX_SAMPLES  # what the native payload accepts
MAX_JSON_CONTAINERS = 2_000_000  # objects and arrays in one JSON file
MAX_ERRORS = 100  # problems listed in one answer (the count of all of them is given)
# A pickle of torch.utils.benchmark measurements (a few KiB each): a restricted unpickler
# builds every object before it can be checked, so its size bounds what that may cost.
MAX_PICKLE_BYTES = 4 * 1024 * 1024
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1  # any whole number in a JSON file

# --- the deadline -----------------------------------------------------------------------------

# (monotonic time at which parsing must stop, the seconds it was given); None: no deadline.
_DEADLINE: ContextVar[tuple[float, float] | None] = ContextVar("upload_deadline", default=None)


@contextmanager
def parse_deadline(seconds: float | None) -> Iterator[None]:
    """Parsers called inside give up (OverLimit) once ``seconds`` have passed."""
    token = _DEADLINE.set(None if seconds is None else (time.monotonic() + seconds, seconds))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def check_deadline(file: str, *, line: int | None = None, record: int | None = None) -> None:
    """OverLimit when the parse deadline has passed; called between rows and records."""
    deadline = _DEADLINE.get()
    if deadline is not None and time.monotonic() > deadline[0]:
        raise OverLimit(
            file,
            f"reading the upload took longer than {deadline[1]:g} s "
            "(BENCHWATCH_PARSE_TIMEOUT_S); upload fewer or smaller files at a time",
            line=line,
            record=record,
        )


# --- checks shared by the parsers ------------------------------------------------------------


def check_name(
    file: str, value: str, *, field: str, record: int | None = None, line: int | None = None
) -> str:
    """``value``, if it is at most MAX_NAME_CHARS long (checked before any pattern scans it)."""
    if len(value) > MAX_NAME_CHARS:
        message = f"a name of {len(value)} characters; at most {MAX_NAME_CHARS}"
        raise OverLimit(file, message, record=record, line=line, field=field)
    return value


def check_results(
    file: str,
    count: int,
    *,
    line: int | None = None,
    record: int | None = None,
    what: str = "results",
) -> None:
    """OverLimit when a file has more than MAX_RESULTS_PER_FILE results (or rows, records)."""
    if count > MAX_RESULTS_PER_FILE:
        message = f"more than {MAX_RESULTS_PER_FILE} {what} in one file; split it into several runs"
        raise OverLimit(file, message, line=line, record=record)


def check_samples(file: str, count: int, *, field: str, record: int | None = None) -> None:
    """OverLimit when one result would have more than MAX_SAMPLES_PER_RESULT samples."""
    if count > MAX_SAMPLES_PER_RESULT:
        message = f"{count} values for one result; at most {MAX_SAMPLES_PER_RESULT}"
        raise OverLimit(file, message, record=record, field=field)


def check_int32(
    file: str, value: int, *, field: str, record: int | None = None, line: int | None = None
) -> int:
    """``value``, if its INTEGER column can hold it."""
    if value > INT32_MAX:
        message = f"{value} is too large; at most {INT32_MAX}"
        raise UploadError(file, message, record=record, line=line, field=field)
    return value


def in_time_range(at: datetime) -> bool:
    """Whether a run's time is one the native payload takes (a naive one is read as UTC)."""
    return EARLIEST <= (at if at.tzinfo else at.replace(tzinfo=UTC)) < LATEST


def check_text(file: str, text: str) -> None:
    """UploadError at the line of the first NUL character: Postgres cannot store one."""
    if (at := text.find("\x00")) != -1:
        raise UploadError(file, "a NUL character: it cannot be stored", line=line_of(text, at))


def line_of(text: str, offset: int) -> int:
    """The 1-based line of a character offset."""
    return text.count("\n", 0, offset) + 1


# --- JSON --------------------------------------------------------------------------------------

# A JSON string, for counting what lies outside strings (unrolled: linear, no backtracking).
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NUL_ESCAPE = "\\u0000"
_SURELY_INT64 = 18  # characters of a literal that fits in 64 bits, whatever its digits
_INT64_CHARS = len(str(INT64_MIN))


class _OutOfRange(Exception):
    """A number literal no column holds (raised from inside json.loads)."""

    def __init__(self, literal: str, message: str) -> None:
        super().__init__(message)
        self.literal, self.message = literal, message


def _whole_number(literal: str) -> int:
    if len(literal) <= _SURELY_INT64:
        return int(literal)
    # The length test before int(): int() of thousands of digits is slow, and refused anyway.
    if len(literal) > _INT64_CHARS or not INT64_MIN <= (value := int(literal)) <= INT64_MAX:
        shown = literal if len(literal) <= 24 else f"{literal[:20]}... ({len(literal)} digits)"
        raise _OutOfRange(literal, f"the whole number {shown} does not fit in 64 bits")
    return value


def _real_number(literal: str) -> float:
    value = float(literal)
    if math.isinf(value):
        shown = literal if len(literal) <= 24 else f"{literal[:20]}..."
        raise _OutOfRange(literal, f"the number {shown} is out of range (overflows to infinity)")
    return value


# One decoder for every document: json.loads(..., parse_int=...) builds a new one per call.
_DECODER = json.JSONDecoder(parse_int=_whole_number, parse_float=_real_number)


def parse_json(
    file: str, data: str | bytes, *, line: int | None = None, checked: bool = False
) -> Any:
    """A JSON document within the caps, as ``json.loads`` reads it.

    ``NaN`` and ``Infinity`` (which Python writes and Google Benchmark too) stay floats, for
    each format to judge; a literal that only overflows to infinity is refused. Raises
    ``json.JSONDecodeError`` and ``UnicodeDecodeError`` as ``json.loads`` does, for the caller
    to phrase; UploadError or OverLimit for the rest.

    Args:
        file: the file's name, for the errors.
        data: the document.
        line: the line of a JSON-lines file this document is, for the errors.
        checked: whether ``check_json_text`` has passed the whole file this document is a
            line of (it is then not run again on each line).
    """
    if isinstance(data, str):
        text = data
    else:
        text = data.decode(json.detect_encoding(data), "surrogatepass")
    if not checked:
        check_json_text(file, text)
    if text.startswith("\ufeff"):  # as json.loads refuses it
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    try:
        value = _DECODER.decode(text)
    except RecursionError:
        raise _too_deep(file, line, "") from None
    except _OutOfRange as exc:
        found = text.find(exc.literal)
        raise UploadError(file, exc.message, line=line or line_of(text, max(found, 0))) from None
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH:  # else it cannot nest that deep
        _check_depth(file, value, line)
    return value


def check_json_text(file: str, text: str) -> None:
    """What is refused before a JSON file is parsed: too many containers, NUL characters.

    json.loads builds every object and array without a pause (seconds for millions of them),
    so they are counted first; a NUL can only be an escape, which a string search finds.
    """
    count = text.count("[") + text.count("{")
    # brackets inside strings are counted too: only when that is too many, count outside them
    if count > MAX_JSON_CONTAINERS and _containers_outside_strings(text) > MAX_JSON_CONTAINERS:
        message = f"more than {MAX_JSON_CONTAINERS} JSON objects and arrays in one file"
        raise OverLimit(file, message)
    if (at := _nul_escape(text)) is not None:
        message = "a NUL character (\\u0000) in a string: it cannot be stored"
        raise UploadError(file, message, line=line_of(text, at))


def _containers_outside_strings(text: str) -> int:
    outside = _STRING.sub("", text)
    return outside.count("[") + outside.count("{")


def _nul_escape(text: str) -> int | None:
    r"""The offset of the first ``\u0000`` escape (not an escaped backslash before ``u0000``)."""
    at = text.find(_NUL_ESCAPE)
    while at != -1:
        start = at
        while start > 0 and text[start - 1] == "\\":
            start -= 1
        if (at - start) % 2 == 0:  # an even run of backslashes before it escapes itself
            return at
        at = text.find(_NUL_ESCAPE, at + 1)
    return None


def _check_depth(file: str, value: Any, line: int | None) -> None:
    """OverLimit when objects and arrays nest deeper than MAX_JSON_DEPTH.

    The walk goes container by container; the members of each are told apart by the set of
    their types, which the interpreter builds without running a bytecode per member.
    """
    if not isinstance(value, dict | list):
        return
    stack: list[tuple[Any, int, Any]] = [(value, 1, None)]
    while stack:
        node, depth, where = stack.pop()
        kinds = set(map(type, node.values() if isinstance(node, dict) else node))
        if dict not in kinds and list not in kinds:
            continue
        for key, member in node.items() if isinstance(node, dict) else enumerate(node):
            if isinstance(member, dict | list):
                if depth >= MAX_JSON_DEPTH:
                    raise _too_deep(file, line, _path((where, key)))
                stack.append((member, depth + 1, (where, key)))


def _path(where: Any) -> str:
    """``[0].benchmark.extra_info`` of a chain of (parent, key) links, shortened."""
    keys: list[Any] = []
    while where is not None:
        where, key = where
        keys.append(key)
    path = "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in reversed(keys))
    path = path.removeprefix(".")
    return path if len(path) <= 120 else f"{path[:117]}..."


def _too_deep(file: str, line: int | None, where: str) -> OverLimit:
    message = f"JSON nested deeper than {MAX_JSON_DEPTH} levels"
    return OverLimit(file, message, line=line, field=where or None)
