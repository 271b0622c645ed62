"""Insert-if-absent that is safe under concurrent writers, on Postgres and SQLite."""

from collections.abc import Iterable, Sequence
from typing import Any, TypeVar, cast

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import DeclarativeBase, Session

T = TypeVar("T")
CHUNK = 900  # below SQLite's oldest bound-parameter limit per statement


def chunks(items: Sequence[T], size: int = CHUNK) -> Iterable[Sequence[T]]:
    """Consecutive slices of at most ``size`` items."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def table_of(model: type[DeclarativeBase]) -> Table:
    """The Core table of a mapped class (for bulk statements without ORM overhead)."""
    return cast(Table, model.__table__)


def insert_missing(
    session: Session,
    model: type[DeclarativeBase],
    rows: list[dict[str, Any]],
    conflict: Sequence[str],
) -> None:
    """Insert ``rows``, silently skipping those whose ``conflict`` columns already exist.

    Rows are inserted in a stable order so that two writers adding overlapping sets lock
    them in the same order and cannot deadlock.
    """
    if not rows:
        return
    rows = sorted(rows, key=lambda row: tuple(str(row[c]) for c in conflict))
    dialect = session.get_bind().dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    for part in chunks(rows, CHUNK // max(1, len(rows[0]))):
        statement = (
            insert(table_of(model))
            .values(list(part))
            .on_conflict_do_nothing(index_elements=conflict)
        )
        session.execute(statement)
