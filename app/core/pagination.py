"""Pages for catalogs (offset, with their count) and opaque keyset cursors for time-ordered rows."""

import base64
import binascii
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, Generic, TypeVar

from fastapi import Query
from pydantic import BaseModel
from sqlalchemy import ColumnExpressionArgument, Select, func, select
from sqlalchemy.orm import Session

from app.core.errors import InvalidInput

T = TypeVar("T")
MAX_PAGE = 1_000_000  # (page - 1) * limit stays far inside a 64-bit OFFSET
CURSOR_MAX_LENGTH = 200  # the cursors given out are under 100 characters
_INT32_MAX = 2**31 - 1  # ids are INTEGER columns


class Page(BaseModel, Generic[T]):
    """One page of a catalog listing."""

    items: list[T]
    total: int
    page: int
    limit: int


class PageParams(BaseModel):
    """``page`` (from 1) and ``limit`` query parameters."""

    page: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 1
    limit: Annotated[int, Query(ge=1, le=500)] = 50

    @property
    def offset(self) -> int:
        """Rows to skip."""
        return (self.page - 1) * self.limit

    def of(self, items: list[T], total: int) -> Page[T]:
        """This page of a listing: its items and how many match in all."""
        return Page(items=items, total=total, page=self.page, limit=self.limit)


def count_of(session: Session, query: Select[Any]) -> int:
    """How many rows ``query`` matches, counted in SQL (its order and options aside)."""
    counted = select(func.count()).select_from(query.order_by(None).subquery())
    return session.scalar(counted) or 0


def count_and_page(
    session: Session,
    query: Select[T],
    order_by: Sequence[ColumnExpressionArgument[Any]],
    offset: int,
    limit: int,
) -> tuple[list[T], int]:
    """One page of ``query`` in ``order_by`` order, and how many it matches in all.

    ``order_by`` empty: the query's own order. The order should end on a unique column, so
    that pages neither repeat nor skip a row.
    """
    total = count_of(session, query)
    page = query.order_by(*order_by).offset(offset).limit(limit)
    return list(session.scalars(page)), total


def _encode(value: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


def _decode(cursor: str, param: str) -> Any:
    """The JSON a cursor holds; a cursor that was not given out is a 422."""
    try:
        return json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, binascii.Error) as exc:
        raise _invalid(cursor, param) from exc


def _invalid(cursor: str, param: str) -> InvalidInput:
    shown = cursor if len(cursor) <= 40 else cursor[:40] + "..."
    return InvalidInput(
        f"invalid {param} {shown!r}: pass back the cursor of the previous answer",
        errors=[{"loc": f"query.{param}", "field": param, "message": "not a cursor given out"}],
    )


def encode_cursor(at: datetime, row_id: int) -> str:
    """An opaque cursor for the row after which the next page starts."""
    return _encode([at.isoformat(), row_id])


def decode_cursor(cursor: str, param: str = "cursor") -> tuple[datetime, int]:
    """The (timestamp, id) a cursor stands for; a tampered cursor is a 422."""
    match _decode(cursor, param):
        case [str(text), int(row_id)] if 0 <= row_id <= _INT32_MAX:
            try:
                at = datetime.fromisoformat(text)
                if at.tzinfo is not None:
                    at.astimezone(UTC)  # one out of range once in UTC fails here, not in SQL
            except (ValueError, OverflowError) as exc:
                raise _invalid(cursor, param) from exc
            return at, row_id
    raise _invalid(cursor, param)


def encode_offset(offset: int) -> str:
    """An opaque cursor for a position in a list that does not change (a run's results)."""
    return _encode({"offset": offset})


def decode_offset(cursor: str, param: str = "cursor") -> int:
    """The position an offset cursor stands for; a tampered cursor is a 422."""
    match _decode(cursor, param):
        case {"offset": int(offset)} if 0 <= offset <= _INT32_MAX:
            return offset
    raise _invalid(cursor, param)


def within_bytes(weights: list[int], budget: int) -> int:
    """How many of these items, in order, fit in ``budget`` bytes: at least one.

    A page cut by what it ships as well as by its row count; one item over the budget still
    ships alone, so a reader always gets on.
    """
    total = 0
    for taken, weight in enumerate(weights):
        total += weight
        if total > budget:
            return max(taken, 1)
    return len(weights)
