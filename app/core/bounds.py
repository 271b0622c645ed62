"""What the columns hold: bounded ids, integers, timestamps and NUL-free text.

Every id and integer column is an SQL INTEGER (32 bits on Postgres, which also casts each
bound parameter to its column's type), so a larger number in a path, a query or a body would
fail in the database; these types refuse it first, with a 422 that says where.
"""

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any

import annotated_types
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

INT32_MAX = 2**31 - 1
# Nesting of JSON objects and arrays, in an upload or an API body: real files and payloads nest
# under 10, and json.loads's own limit (a RecursionError) moves with the depth of the stack.
MAX_JSON_DEPTH = 64
# A run's time: sorting, windows and charts subtract days and hours from it, which must not
# leave the range of datetime; no benchmark ran before 1970.
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(3000, 1, 1, tzinfo=UTC)

RowId = Annotated[int, annotated_types.Interval(ge=1, le=INT32_MAX)]
"""An id of a stored row, in a path or a query."""
Int32 = Annotated[int, annotated_types.Interval(ge=0, le=INT32_MAX)]
"""A count or size stored in an INTEGER column."""


def in_id_range(row_id: int) -> bool:
    """Whether ``row_id`` can name a stored row (a larger one fails as an SQL parameter)."""
    return 1 <= row_id <= INT32_MAX


def _utc_representable(value: datetime) -> datetime:
    if value.tzinfo is not None:
        try:
            value.astimezone(UTC)
        except OverflowError:
            raise ValueError("the time is out of range once converted to UTC") from None
    return value


def _run_time(value: datetime) -> datetime:
    if value.tzinfo is not None and not EARLIEST <= value < LATEST:
        raise ValueError("a run's time must be from 1970 to 2999")
    return value


def _iso_text(value: Any) -> Any:
    # pydantic reads a number (or a string of one) as Unix seconds; the OpenAPI schema says an
    # ISO 8601 date-time string, and only that is taken.
    if isinstance(value, int | float) and not isinstance(value, bool):
        raise ValueError("a time is an ISO 8601 string, e.g. 2026-11-29T00:00:00Z")
    if isinstance(value, str) and not _ISO_DATE.match(value):
        raise ValueError("a time is an ISO 8601 string, e.g. 2026-11-29T00:00:00Z")
    return value


_ISO_DATE = re.compile(r"\d{4}-\d\d-\d\d")
ISO_TEXT = BeforeValidator(_iso_text)
"""Refuses a number for a time: ``Annotated[datetime, ISO_TEXT]``."""

QueryTime = Annotated[datetime, ISO_TEXT, AfterValidator(_utc_representable)]
"""A time in a query (``since``, ``until``): any that has a UTC equivalent."""
RunTime = Annotated[datetime, AfterValidator(_utc_representable), AfterValidator(_run_time)]
"""A time stored with a run: from 1970 to 2999 (a naive one is refused by its model)."""


def _json_number(value: Any) -> Any:
    # pydantic reads "0.5" and true as the numbers 0.5 and 1; the OpenAPI schema says a number.
    if isinstance(value, str | bool):
        raise ValueError("must be a number, not a string or a boolean")
    return value


JSON_NUMBER = BeforeValidator(_json_number)
"""Refuses a string or a boolean for a number: ``Annotated[float, JSON_NUMBER]``."""


NUL_FREE = r"^[^\x00]*$"
"""What the OpenAPI schema says of text that Postgres can store: no NUL character."""


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("NUL characters (\\u0000) cannot be stored")
    return value


@dataclass(frozen=True)
class _NulFree:
    """Refuses text with NUL characters, and its schema says so (``NUL_FREE``).

    Without the pattern the schema calls a string with a NUL valid, and the API answers 422.
    A type with a pattern of its own keeps it, and spells NUL out of it instead.
    """

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(_no_nul, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        json_schema = handler(schema)
        json_schema.setdefault("pattern", NUL_FREE)
        return json_schema


NulFree = _NulFree()
"""Refuses text with NUL characters (Postgres cannot store them): ``Annotated[str, NulFree]``."""


def nul_locations(value: Any, path: str = "") -> Iterator[str]:
    """Where in a model, dict or list a string (or a dict key) holds a NUL character."""
    if isinstance(value, str):
        if "\x00" in value:
            yield path
    elif isinstance(value, BaseModel):
        for name, item in value:
            yield from nul_locations(item, f"{path}.{name}" if path else name)
    elif isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            if "\x00" in str(key):
                yield where
            yield from nul_locations(item, where)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from nul_locations(item, f"{path}[{index}]")


def fit(name: str, length: int, whole: str, digest_chars: int) -> str:
    """``name`` if it fits in ``length``; else its start and a hash of ``whole``.

    The hash keeps apart two long names that share their start.
    """
    if len(name) <= length:
        return name
    digest = hashlib.sha256(whole.encode()).hexdigest()[:digest_chars]
    return f"{name[: length - digest_chars - 1]}-{digest}"
