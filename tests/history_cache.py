"""A history built once per test process, then copied into later tests' databases.

``post_history`` posts dozens of nightlies through the API and detects each in process: seconds
of work, and many tests on both dialects start from the same one. The first test to build a
history builds it as ever, through the API; the rows its database then holds are kept here,
and a later test that would build the same history on the same start gets those rows
inserted instead, with the ids and the detection's findings they had.

"The same history on the same start" is strict, so that a copy is only ever what the build
would have made:

- the same build (its key: the change, the runs, the seed) and the same dialect;
- the same settings of the app it is posted to (thresholds and the like change detection);
- an in-process publisher (with Celery the caller polls the detection itself), with the same
  jobs and the same detectors (a test turns detection off by taking its job away);
- a database holding nothing but tokens, the same ones (name, scopes, machines, project,
  the one that posts) and their audit entries, so every id the rows carry means what it
  meant. Anything else there (a subscription that detection would notify, runs of an earlier
  call) and the history is built, not copied.

Each pytest-xdist worker keeps its own copies; a run without workers too. The start's rows
stay the test's own (the tokens' secrets differ); of those tables only the rows the build
added are copied, and nothing else of the first test's is left.
``BENCHWATCH_TEST_HISTORIES=build`` builds every history, to compare a run with the copies.
"""

import os
from collections.abc import Callable, Hashable
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import Connection, Table, select, text

from app.anomalies import registry
from app.core.db import Base, Database
from app.core.queue import InProcessPublisher
from app.tokens.service import hash_token
from tests.conftest import filled_tables

TOKENS = "api_token"
# The tables a start may hold rows of, and what a row is, less what differs between two made
# alike (a token's secret, the times).
START = {
    TOKENS: ("id", "name", "scopes", "machine_patterns", "project", "revoked_at"),
    "audit_entry": ("id", "actor", "action", "target"),
}
GENERATION = "catalog_generation"  # the triggers' own, never emptied

ALWAYS_BUILD = os.environ.get("BENCHWATCH_TEST_HISTORIES") == "build"

_built: dict[Hashable, tuple[dict[str, list[dict[str, Any]]], Any]] = {}


def cached_history(
    client: TestClient, headers: dict[str, str], key: Hashable, build: Callable[[], Any]
) -> Any:
    """What ``build()`` returns, with the rows it writes: built, or copied from an earlier build.

    ``headers`` are the ones ``build`` posts with: which of the tokens posts is the start's too.
    """
    app = client.app.state  # type: ignore[attr-defined]
    if ALWAYS_BUILD or not isinstance(app.publisher, InProcessPublisher):
        return build()
    database: Database = app.database
    bearer = headers.get("Authorization", "").removeprefix("Bearer ")
    posting = hash_token(bearer, app.settings.TOKEN_PEPPER.get_secret_value())
    start = _start(database, posting)
    if start is None:
        return build()
    settings = sorted((k, repr(v)) for k, v in app.settings.model_dump().items())
    full_key = (key, database.engine.dialect.name, tuple(settings), start, _detection(app))
    if (kept := _built.get(full_key)) is not None:
        rows, answer = kept
        _insert(database, rows)
        return answer
    answer = build()
    _built[full_key] = (_rows(database, start), answer)
    return answer


def _detection(app: Any) -> tuple[Any, ...]:
    """What detects the posted runs: the jobs a test may take away, the detectors it may add."""
    jobs = sorted(
        (name, getattr(job, "func", job).__qualname__) for name, job in app.publisher.jobs.items()
    )
    return tuple(jobs), tuple(type(detector).__qualname__ for detector in registry.DETECTORS)


def _tables() -> list[Table]:
    return [table for table in Base.metadata.sorted_tables if table.name != GENERATION]


def _start(database: Database, posting: str) -> tuple[Any, ...] | None:
    """The start's rows (and which token posts), when the database holds nothing else."""
    others = [table.name for table in _tables() if table.name not in START]
    with database.engine.connect() as conn:
        if filled_tables(conn, others):
            return None
        start = []
        for name, identity in START.items():
            table = Base.metadata.tables[name]
            columns = [table.c[column] for column in identity]
            if name == TOKENS:
                columns.append(table.c.token_hash == posting)
            found = conn.execute(select(*columns).order_by(table.c.id)).all()
            if [row[0] for row in found] != list(range(1, len(found) + 1)):
                return None  # ids from an earlier test's sequence: the rows' would differ
            start.append((name, tuple(repr(tuple(row)) for row in found)))
    return tuple(start)


def _rows(database: Database, start: tuple[Any, ...]) -> dict[str, list[dict[str, Any]]]:
    """Every row the build added, parents first: of the start's tables, those past its ids."""
    counted = dict(start)
    kept: dict[str, list[dict[str, Any]]] = {}
    with database.engine.connect() as conn:
        for table in _tables():
            query = select(table)
            if table.name in START:
                query = query.where(table.c.id > len(counted[table.name]))
            found = [dict(row._mapping) for row in conn.execute(query)]
            if found:
                kept[table.name] = found
    return kept


def _insert(database: Database, rows: dict[str, list[dict[str, Any]]]) -> None:
    """The rows, in one transaction; on Postgres each id sequence then goes on after them."""
    with database.engine.begin() as conn:
        for table in _tables():
            if table.name in rows:
                conn.execute(table.insert(), rows[table.name])
        if database.engine.dialect.name == "postgresql":
            _advance_sequences(conn, rows)


def _advance_sequences(conn: Connection, rows: dict[str, list[dict[str, Any]]]) -> None:
    for name in rows:
        table = Base.metadata.tables[name]
        if "id" not in table.c or not table.c.id.primary_key:
            continue
        sequence = conn.scalar(text("SELECT pg_get_serial_sequence(:t, 'id')"), {"t": name})
        if sequence is not None:
            conn.execute(text(f"SELECT setval(:s, (SELECT max(id) FROM {name}))"), {"s": sequence})
