"""Copy a whole database into an empty one (``benchwatch copy``): SQLite to Postgres, and back.

The tables and their types come from the caller's ``MetaData`` (the CLI passes every model's),
so this module knows no domain. The copy:

1. refuses a source that is not at the newest migration (it must be migrated first), a source
   with a column the metadata lacks (the copy would lose it), and a target that holds rows;
2. migrates the target to the newest schema (its ``alembic_version`` is its own);
3. reads every table in foreign-key order, in primary-key order, ``BATCH`` rows at a time (a
   server-side cursor on Postgres), inside one snapshot of the source, and writes it with the
   same ids: COPY on Postgres (a table per statement, so a row may point at a later row of its
   table), executemany on SQLite (foreign keys checked at the commit), all in one transaction
   of the target (a failed copy leaves it empty, ready for another try);
4. moves each Postgres sequence past the largest id copied;
5. and ``verify`` counts each table's rows on both sides afterwards.

Values pass through the column types: ``UTCDateTime`` gives aware datetimes whichever dialect
stored them (SQLite's are naive UTC), booleans stored as 0/1 by SQLite become booleans, JSON is
decoded and encoded again, except into Postgres, where COPY takes the source's JSON text as it is.
"""

import time
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    Integer,
    MetaData,
    Table,
    Text,
    cast,
    func,
    inspect,
    select,
    text,
)
from sqlalchemy.engine import make_url
from sqlalchemy.types import JSON, TypeDecorator, TypeEngine

from app.core.db import make_engine
from app.core.errors import Conflict
from app.core.migrate import is_up_to_date, upgrade_database

BATCH = 10_000  # rows read (and held) at a time
VERSION_TABLE = "alembic_version"  # each side's own: the target's comes from its migration

Progress = Callable[[int, int, str], None]  # rows done, rows in the table, the table's name


class CopyRefused(Conflict):
    """The source or the target is not fit for a copy; nothing was written."""


@dataclass(frozen=True)
class TableCopied:
    """One table's copy: its rows and how long they took."""

    table: str
    rows: int
    seconds: float

    @property
    def rows_per_s(self) -> float:
        """Throughput of the table's copy."""
        return self.rows / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class Mismatch:
    """A table whose row counts differ between source and target."""

    table: str
    source: int
    target: int


def copy_database(
    source_url: str,
    target_url: str,
    metadata: MetaData,
    *,
    keep: Collection[str] = (),
    progress: Progress | None = None,
    on_table: Callable[[TableCopied], None] | None = None,
) -> list[TableCopied]:
    """Copy every table of ``metadata`` from ``source_url`` into the empty ``target_url``.

    Args:
        source_url: the database to read, at the newest migration.
        target_url: an empty database (or a new SQLite file); migrated here first.
        metadata: the tables to copy (in its foreign-key order) and their column types.
        keep: tables the target's migration fills itself: neither copied nor counted.
        progress: called as each batch is written (rows done, rows in the table, table).
        on_table: called as each table is done.

    Raises:
        CopyRefused: the source is missing, not migrated or has columns the copy would
            lose; the target is the source or is not empty. Nothing was written then.
    """
    tables = [t for t in metadata.sorted_tables if t.name not in keep]
    with _engines(source_url, target_url) as (source, target):
        _check_source(source, tables)
        _refuse_unless_empty(target, tables, metadata.tables)
        upgrade_database(target_url)
        _refuse_unless_empty(target, tables)  # a writer may have begun meanwhile
        done: list[TableCopied] = []
        with _snapshot(source) as reading, target.begin() as writing:
            if writing.dialect.name == "sqlite":
                # A row may point at a later row of its table (a notice at its digest), and
                # SQLite checks each inserted row at once: check them at the commit instead.
                writing.exec_driver_sql("BEGIN")  # pysqlite has begun none yet
                writing.exec_driver_sql("PRAGMA defer_foreign_keys = ON")
            for table in tables:
                began = time.perf_counter()
                rows = _copy_table(reading, writing, table, progress or _silent)
                done.append(TableCopied(table.name, rows, time.perf_counter() - began))
                if on_table is not None:
                    on_table(done[-1])
            if writing.dialect.name == "postgresql":
                _reset_sequences(writing, tables)
        return done


def verify(
    source_url: str, target_url: str, metadata: MetaData, *, keep: Collection[str] = ()
) -> list[Mismatch]:
    """The tables whose row counts differ between source and target (none: all agree)."""
    tables = [t for t in metadata.sorted_tables if t.name not in keep]
    with _engines(source_url, target_url) as (source, target):
        counted = {}
        for side, engine in (("source", source), ("target", target)):
            present = set(inspect(engine).get_table_names())
            if missing := [t.name for t in tables if t.name not in present]:
                raise CopyRefused(f"the {side} has no table {', '.join(missing)}")
            counted[side] = _counts(engine, tables)
    return [
        Mismatch(t.name, counted["source"][t.name], counted["target"][t.name])
        for t in tables
        if counted["source"][t.name] != counted["target"][t.name]
    ]


@contextmanager
def _engines(source_url: str, target_url: str) -> Iterator[tuple[Engine, Engine]]:
    if _same_database(source_url, target_url):
        raise CopyRefused("--from and --to name the same database")
    _refuse_missing_file(source_url)
    source, target = make_engine(source_url), make_engine(target_url)
    try:
        yield source, target
    finally:
        source.dispose()
        target.dispose()


def _same_database(a: str, b: str) -> bool:
    first, second = make_url(a), make_url(b)
    if first.get_backend_name() == "sqlite" and second.get_backend_name() == "sqlite":
        return _sqlite_path(first.database) == _sqlite_path(second.database)
    keys = ("host", "port", "database")
    return first.get_backend_name() == second.get_backend_name() and all(
        getattr(first, k) == getattr(second, k) for k in keys
    )


def _sqlite_path(database: str | None) -> str:
    if not database or database == ":memory:":
        return f":memory:{id(database)}"  # two in-memory databases are never the same
    return str(Path(database).resolve())


def _refuse_missing_file(url: str) -> None:
    """SQLite would make an empty file of a mistyped path: say so instead."""
    parsed = make_url(url)
    path = parsed.database
    on_disk = parsed.get_backend_name() == "sqlite" and path and path != ":memory:"
    if on_disk and not Path(str(path)).is_file():
        raise CopyRefused(f"the source SQLite file {path} does not exist")


def _check_source(source: Engine, tables: list[Table]) -> None:
    if not is_up_to_date(source):
        raise CopyRefused(
            "the source database is not at the newest schema: migrate it first "
            "(BENCHWATCH_DATABASE_URL=<the --from URL> benchwatch migrate), then copy"
        )
    inspector = inspect(source)
    present = set(inspector.get_table_names())
    for table in tables:
        if table.name not in present:
            raise CopyRefused(f"the source has no table {table.name}: is it a benchwatch database?")
        extra = {c["name"] for c in inspector.get_columns(table.name)} - set(table.columns.keys())
        if extra:
            raise CopyRefused(
                f"the source's table {table.name} has columns this version does not know "
                f"({', '.join(sorted(extra))}): the copy would lose them; copy with the "
                "benchwatch version that wrote them"
            )


def _refuse_unless_empty(
    target: Engine, tables: list[Table], ours: Collection[str] | None = None
) -> None:
    """Refuse a target with rows in a copied table, or (given ``ours``) with tables of others.

    A Postgres partition of one of ours (the migrations may partition a table) is ours.
    """
    present = set(inspect(target).get_table_names())
    with target.connect() as connection:
        for table in tables:
            if table.name in present and connection.scalar(select(1).select_from(table).limit(1)):
                raise CopyRefused(
                    f"the target database is not empty (table {table.name} has rows): copy "
                    "into an empty one: on Postgres `DROP DATABASE name` and `CREATE DATABASE "
                    "name` (or createdb a new one); on SQLite a path where no file is yet"
                )
    if ours is None:
        return
    if strangers := sorted(present - set(ours) - {VERSION_TABLE} - partition_names(target)):
        raise CopyRefused(
            f"the target database holds tables benchwatch does not use ({', '.join(strangers)}):"
            " copy into a database of its own"
        )


def partition_names(engine: Engine | Connection) -> set[str]:
    """The Postgres partitions in the database: parts of a table, not tables of their own."""
    if engine.dialect.name != "postgresql":
        return set()
    query = "SELECT relname FROM pg_class WHERE relispartition AND relkind IN ('r', 'p')"
    if isinstance(engine, Connection):
        return set(engine.exec_driver_sql(query).scalars())
    with engine.connect() as connection:
        return set(connection.exec_driver_sql(query).scalars())


@contextmanager
def _snapshot(source: Engine) -> Iterator[Connection]:
    """A connection that reads one consistent state of the source, table after table."""
    if source.dialect.name == "postgresql":
        with source.connect().execution_options(
            isolation_level="REPEATABLE READ", postgresql_readonly=True
        ) as connection:
            yield connection
        return
    with source.connect() as connection:
        if source.dialect.name == "sqlite":
            connection.exec_driver_sql("BEGIN")  # pysqlite starts none before a SELECT
        yield connection


def _silent(_done: int, _total: int, _table: str) -> None:
    pass


def _copy_table(reading: Connection, writing: Connection, table: Table, progress: Progress) -> int:
    """Copy one table in batches; return the number of rows written."""
    total = reading.scalar(select(func.count()).select_from(table)) or 0
    progress(0, total, table.name)
    order = list(table.primary_key.columns) or list(table.columns)
    if writing.dialect.name == "postgresql":
        return _copy_into_postgres(
            reading, writing, table, order, lambda done: progress(done, total, table.name)
        )
    result = reading.execution_options(yield_per=BATCH).execute(select(table).order_by(*order))
    keys = [c.key for c in table.columns]
    insert = table.insert()
    done = 0
    with closing(result):
        for batch in result.partitions():
            writing.execute(insert, [dict(zip(keys, row, strict=True)) for row in batch])
            done += len(batch)
            progress(done, total, table.name)
    return done


def _copy_into_postgres(
    reading: Connection,
    writing: Connection,
    table: Table,
    order: Sequence[ColumnElement[Any]],
    progress: Callable[[int], None],
) -> int:
    """COPY the rows in; JSON travels as the source's text (decoding it costs the most).

    The text of a JSON null in a nullable column becomes SQL NULL, as the app's COPY of
    results writes a missing value (SQLite's JSON columns store None as that text).
    """
    columns = list(table.columns)
    json_at = [i for i, c in enumerate(columns) if _is_json(c.type)]
    nullable_json_at = [i for i in json_at if columns[i].nullable]
    selected = [cast(c, Text) if i in json_at else c for i, c in enumerate(columns)]
    result = reading.execution_options(yield_per=BATCH).execute(select(*selected).order_by(*order))
    cursor = writing.connection.driver_connection.cursor()  # type: ignore[union-attr]
    quote = writing.dialect.identifier_preparer.quote
    names = ", ".join(quote(c.name) for c in columns)
    done = 0
    with closing(result), cursor.copy(f"COPY {quote(table.name)} ({names}) FROM STDIN") as copy:
        for batch in result.partitions():
            for row in batch:
                if nullable_json_at:
                    values = list(row)
                    for i in nullable_json_at:
                        if values[i] == "null":
                            values[i] = None
                    copy.write_row(values)
                else:
                    copy.write_row(row)
            done += len(batch)
            progress(done)
    return done


def _is_json(type_: TypeEngine[Any]) -> bool:
    if isinstance(type_, TypeDecorator):
        type_ = type_.impl_instance
    return isinstance(type_, JSON)


def _reset_sequences(writing: Connection, tables: list[Table]) -> None:
    """Postgres: each table's id sequence hands out the id after the largest copied."""
    quote = writing.dialect.identifier_preparer.quote
    for table in tables:
        key = list(table.primary_key.columns)
        if len(key) != 1 or not isinstance(key[0].type, Integer):
            continue
        column = key[0].name
        writing.execute(
            text(
                "SELECT setval(pg_get_serial_sequence(:table, :column), "
                f"coalesce(max({quote(column)}), 0) + 1, false) FROM {quote(table.name)}"
            ),
            {"table": quote(table.name), "column": column},
        )


def _counts(engine: Engine, tables: list[Table]) -> dict[str, int]:
    with engine.connect() as connection:
        return {t.name: connection.scalar(select(func.count()).select_from(t)) or 0 for t in tables}
