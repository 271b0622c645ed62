"""Pages for catalogs (offset) and opaque keyset cursors for time-ordered rows."""

import base64
import binascii
import json
from datetime import datetime
from typing import Annotated, Generic, TypeVar

from fastapi import Query
from pydantic import BaseModel

from app.core.errors import InvalidInput

T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    """One page of a catalog listing."""

    items: list[T]
    total: int
    page: int
    limit: int


class PageParams(BaseModel):
    """``page`` (from 1) and ``limit`` query parameters."""

    page: Annotated[int, Query(ge=1)] = 1
    limit: Annotated[int, Query(ge=1, le=500)] = 50

    @property
    def offset(self) -> int:
        """Rows to skip."""
        return (self.page - 1) * self.limit

    def of(self, items: list[T], total: int) -> Page[T]:
        """This page of a listing: its items and how many match in all."""
        return Page(items=items, total=total, page=self.page, limit=self.limit)


def encode_cursor(at: datetime, row_id: int) -> str:
    """An opaque cursor for the row after which the next page starts."""
    raw = json.dumps([at.isoformat(), row_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, int]:
    """The (timestamp, id) a cursor stands for; a tampered cursor is a 422."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        at, row_id = json.loads(raw)
        return datetime.fromisoformat(at), int(row_id)
    except (ValueError, TypeError, binascii.Error) as exc:
        raise InvalidInput(f"invalid cursor {cursor!r}: pass back a next_cursor") from exc
