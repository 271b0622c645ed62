"""github-action-benchmark's custom JSON (``customSmallerIsBetter``, ``customBiggerIsBetter``).

The file is a list of ``{"name", "unit", "value", "range"?, "extra"?}`` and does not say
which way is better: the action's tool name does. So do two formats here,
``custom-smaller-is-better`` and ``custom-bigger-is-better``, named after those tools. Under
``format=auto`` a file is one of them when its name says so as the action's own test data do
(``customSmallerIsBetter_output.json``, ``latency-smaller-is-better.json``: case, ``-`` and
``_`` aside); any other file of this shape is recognised as ``github-action-benchmark``,
which answers 422 at the field ``format`` saying which of the two to give.

Each entry is one row: ``model`` = ``name``, ``unit`` = the entry's unit when benchwatch
knows it (``ns``, ``ms``, ``req/s``, ``%``, ``Megabytes`` -> ``MB``...; any other unit is
kept in ``extra.unit``), ``higher_is_better`` from the format, and ``metric`` the direction
and the unit's dimension (``smaller_is_better:time``, ``bigger_is_better:bytes``; an unknown
unit's text in place of the dimension): one metric has one unit and direction. The action
coerces values and strings as zod does: a number written as a string is read, ``range``
and ``extra`` may be numbers. ``range`` (``"± 3.2%"``, ``"+/- 0.5"``, ``"stddev: 0.04"``) is a
spread the native schema has no field for (a result's spread is computed from its samples):
it is kept in ``extra.range`` as written, and, when it reads as a number, as the absolute
half-width ``extra.range_value`` in the row's unit. No file says the device: ``device=``.
"""

import re
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import Any

from app.benchmarks import vocabulary as vocab
from app.uploads import limits, reading
from app.uploads.base import Hints, Parsed, UploadError, UploadFile, UploadFormat

SUITE = "github-action-benchmark"
MAX_RANGE = 256
# The action's free-form units that benchwatch knows under another spelling.
UNIT_ALIASES = {
    "percent": "%",
    "percentage": "%",
    "bytes": "B",
    "kilobytes": "KB",
    "megabytes": "MB",
    "gigabytes": "GB",
    "kib": "KiB",
    "mib": "MiB",
    "gib": "GiB",
    "sec": "s",
    "secs": "s",
    "seconds": "s",
    "second": "s",
    "milliseconds": "ms",
    "microseconds": "us",
    "nanoseconds": "ns",
    "iter/sec": "it/s",
    "iter/s": "it/s",
    "ops/sec": "ops/s",
    "req/sec": "req/s",
    "requests/s": "req/s",
    "tokens/sec": "tokens/s",
}
RANGE = re.compile(r"(?:±|\+-|\+/-|stddev:)?\s*([0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)\s*(%?)")
_SHAPE = re.compile(r'^\[\s*\{\s*"(?:name|unit|value|range|extra)"')


def _parser(higher_is_better: bool) -> Callable[[UploadFile, Hints], Parsed]:
    def parse(file: UploadFile, hints: Hints) -> Parsed:
        return parse_custom(file, hints, higher_is_better=higher_is_better)

    return parse


def parse_custom(file: UploadFile, hints: Hints, *, higher_is_better: bool) -> Parsed:
    """One row per entry; the direction is the format's (the action's tool name)."""
    device = reading.required_device(file, hints, "github-action-benchmark's custom JSON")
    document = reading.load_json(file)
    if not isinstance(document, list):
        raise UploadError(file.name, "expected a JSON list of {name, unit, value} entries")
    limits.check_results(file.name, len(document), what="entries")
    results: list[dict[str, Any]] = []
    first: dict[str, int] = {}
    for index, entry in enumerate(document):
        limits.check_deadline(file.name, record=index)
        row = _row(file.name, index, entry, hints, higher_is_better)
        if (seen := first.setdefault(row["model"], index)) != index:
            message = f"the same name as [{seen}]"
            raise UploadError(file.name, message, record=index, field=f"[{index}].name")
        results.append(row)
    return Parsed(results=results, machine={"device": device})


def _row(file: str, index: int, entry: Any, hints: Hints, higher_is_better: bool) -> dict[str, Any]:
    if not isinstance(entry, dict):
        raise UploadError(file, "an entry must be an object", record=index, field=f"[{index}]")
    name = reading.text(
        file, _coerced(file, index, entry, "name"), field=f"[{index}].name", record=index, limit=256
    )
    written = _coerced(file, index, entry, "unit")
    if len(written) > 64:
        raise UploadError(file, "a unit over 64 characters", record=index, field=f"[{index}].unit")
    value = _value(file, index, entry.get("value"))
    unit = _unit(written)
    extra: dict[str, Any] = {} if unit is not None else {"unit": written}
    for key in ("range", "extra"):
        if entry.get(key) is not None:
            extra[key] = _coerced(file, index, entry, key)[: reading.MAX_TEXT]
    if "range" in extra and (spread := _spread(extra["range"], value)) is not None:
        extra["range_value"] = spread
    row: dict[str, Any] = {
        "suite": hints.suite or SUITE,
        "model": name,
        "mode": hints.mode or "inference",
        "precision": hints.precision or "fp32",
        "config": hints.config or "eager",
        "metric": metric_name(higher_is_better, unit, written),
        "unit": unit or "",
        "higher_is_better": higher_is_better,
        "value": value,
    }
    return row | ({"extra": extra} if extra else {})


def metric_name(higher_is_better: bool, unit: str | None, written: str) -> str:
    """``smaller_is_better:time``: a metric is one unit dimension, one direction.

    benchwatch keeps one unit and direction per metric name, so the entries of these files
    (any unit, either direction) are told apart by both; an unknown unit by its own text.
    """
    direction = "bigger_is_better" if higher_is_better else "smaller_is_better"
    dimension = vocab.UNITS[unit][0] if unit is not None else written.strip() or "value"
    return f"{direction}:{dimension}"


def _coerced(file: str, index: int, entry: dict[str, Any], key: str) -> str:
    """A string field as zod's ``coerce.string`` reads it: a string, or a number's text."""
    value = entry.get(key)
    if isinstance(value, str):
        return value
    if reading.is_number(value):
        reading.finite(file, value, field=f"[{index}].{key}", record=index, minimum=None)
        return str(value)  # as JavaScript's String() writes the usual numbers
    message = f"{key} must be a string" + (", and is missing" if value is None else "")
    raise UploadError(file, message, record=index, field=f"[{index}].{key}")


def _value(file: str, index: int, value: Any) -> float:
    """The value: a finite number, or a string of one (the action coerces it)."""
    field = f"[{index}].value"
    if isinstance(value, str):
        try:
            number = reading.cell_number(file, value, line=None, field=field)
        except UploadError as error:
            raise UploadError(file, error.message, record=index, field=field) from None
        if number is None:
            message = f"value must be a number, got {value[:40]!r}"
            raise UploadError(file, message, record=index, field=field)
        return number
    if value is None:
        raise UploadError(file, "missing required field 'value'", record=index, field=field)
    return reading.finite(file, value, field=field, record=index, minimum=None)


def _unit(written: str) -> str | None:
    """The benchwatch unit of the action's free-form one, or None when there is none."""
    stripped = written.strip()
    if stripped in vocab.UNITS:
        return stripped
    return UNIT_ALIASES.get(stripped.lower())


def _spread(written: str, value: float) -> float | None:
    """The half-width of a range as an absolute number (a percentage of the value)."""
    if len(written) > MAX_RANGE or not (match := RANGE.fullmatch(written.strip())):
        return None
    number = float(match.group(1))
    return abs(value) * number / 100 if match.group(2) else number


def _named_direction(name: str) -> str | None:
    """``smaller`` or ``bigger`` when a file's name says which is better, else None."""
    stem = re.sub(r"[-_ .]", "", PurePosixPath(name.replace("\\", "/")).name.lower())
    for direction in ("smaller", "bigger"):
        if f"{direction}isbetter" in stem:
            return direction
    return None


def _recognises_shape(head: str) -> bool:
    return _SHAPE.match(head) is not None and '"value"' in head and '"name"' in head


def parse_undirected(file: UploadFile, _hints: Hints) -> Parsed:
    """Refused: the file does not say whether smaller or bigger is better."""
    message = (
        "github-action-benchmark's custom JSON does not say which way is better: give "
        "format=custom-smaller-is-better or format=custom-bigger-is-better (the action's "
        "tool), or name the file *smaller-is-better*.json or *bigger-is-better*.json"
    )
    raise UploadError(file.name, message, field="format")


SMALLER_IS_BETTER = UploadFormat(
    "custom-smaller-is-better",
    _parser(higher_is_better=False),
    lambda name, head: _recognises_shape(head) and _named_direction(name) == "smaller",
    "github-action-benchmark's customSmallerIsBetter JSON ([{name, unit, value, range?}])",
)
BIGGER_IS_BETTER = UploadFormat(
    "custom-bigger-is-better",
    _parser(higher_is_better=True),
    lambda name, head: _recognises_shape(head) and _named_direction(name) == "bigger",
    "github-action-benchmark's customBiggerIsBetter JSON ([{name, unit, value, range?}])",
)
# Last in the registry: such a file whose name does not say the direction is refused.
FORMAT = UploadFormat(
    "github-action-benchmark",
    parse_undirected,
    lambda _name, head: _recognises_shape(head),
    "github-action-benchmark's custom JSON without a direction: refused, naming the two formats",
)
