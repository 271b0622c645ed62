"""Bulk statements on Postgres and SQLite: insert-if-absent, membership in long lists, plans."""

from collections.abc import Iterable, Sequence
from typing import Any, TypeVar, cast

from sqlalchemy import ColumnElement, Table, any_, bindparam
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import DeclarativeBase, InstrumentedAttribute, Session

T = TypeVar("T")
M = TypeVar("M", bound=DeclarativeBase)
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
    them in the same order and cannot deadlock. One executemany of one cached statement
    (psycopg pipelines the rows): a statement with the rows' values written into it is
    compiled anew on every call, and a run's first upload, whose benchmarks and series are all
    new, would compile one per chunk of rows.
    """
    if not rows:
        return
    rows = sorted(rows, key=lambda row: tuple(str(row[c]) for c in conflict))
    session.connection().execute(_skipping_conflicts(session, table_of(model), conflict), rows)


def insert_returning(
    session: Session, model: type[M], row: dict[str, Any], conflict: Sequence[str]
) -> M | None:
    """Insert one row and return it as a loaded object; None when ``conflict`` already exists.

    One statement: the row comes back by RETURNING, so no lookup after the insert costs a
    second round trip.
    """
    statement = _skipping_conflicts(session, model, conflict).returning(model)
    return session.scalars(statement, [row]).one_or_none()  # as parameters: no per-call coercion


def _skipping_conflicts(
    session: Session, target: Table | type[DeclarativeBase], conflict: Sequence[str]
) -> postgresql.Insert | sqlite.Insert:
    """INSERT ... ON CONFLICT (conflict) DO NOTHING, in the session's dialect."""
    insert = postgresql.insert if is_postgres(session) else sqlite.insert
    return insert(target).on_conflict_do_nothing(index_elements=conflict)


def plan_for_parameters(session: Session) -> None:
    """Postgres: plan the rest of this transaction's statements for their actual parameters.

    psycopg prepares a statement once a connection has run it five times, and Postgres then
    moves it to a generic plan. There ``column = ANY(:values)`` (``member_of``), when it is a
    filter rather than an index condition, scans the whole array for every row it filters: the
    lookup's cost is the array's length times the rows. A custom plan sees the array and hashes
    it. ``SET LOCAL`` lasts until the transaction ends.
    """
    if is_postgres(session):
        session.connection().exec_driver_sql("SET LOCAL plan_cache_mode = force_custom_plan")


def is_postgres(session: Session) -> bool:
    """Whether the session talks to Postgres."""
    return session.get_bind().dialect.name == "postgresql"


def member_of(
    session: Session, column: InstrumentedAttribute[Any], values: Sequence[Any]
) -> list[ColumnElement[bool]]:
    """Conditions "column is one of values", one per statement to run.

    Postgres takes the whole list as one array parameter (``= ANY(:values)``), which is
    far cheaper to bind and plan than thousands of IN placeholders; SQLite gets IN lists
    in chunks below its parameter limit.
    """
    if is_postgres(session):
        array = bindparam(None, list(values), type_=postgresql.ARRAY(column.type))
        return [column == any_(array)]
    return [column.in_(part) for part in chunks(values)]
