"""Engine, sessions and the declarative base shared by every domain's models."""

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.responses import JSONResponse
from sqlalchemy import DateTime, Engine, MetaData, create_engine, event, text
from sqlalchemy.engine import Dialect, make_url
from sqlalchemy.exc import DisconnectionError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as SATimeoutError
from sqlalchemy.orm import DeclarativeBase, Session, sessionmaker
from sqlalchemy.types import TypeDecorator

from app.core.queue import PUBLISHER, Publisher, commit

log = logging.getLogger(__name__)

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every dialect (SQLite stores them naive)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Normalise to UTC; naive values are taken to be UTC already."""
        if value is None:
            return None
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Give back aware UTC datetimes."""
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    """Declarative base with a constraint naming convention (stable migration names)."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)


def utcnow() -> datetime:
    """The current time, aware, in UTC."""
    return datetime.now(UTC)


def _set_sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def make_engine(url: str) -> Engine:
    """An engine for ``url``; SQLite gets WAL, foreign keys and a busy timeout."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
        event.listen(engine, "connect", _set_sqlite_pragmas)
        return engine
    # JIT off: over result's monthly partitions the planner sums each month's estimate and
    # crosses jit_above_cost for reads of milliseconds, then spends ~100 ms compiling them.
    return create_engine(
        url,
        pool_pre_ping=True,
        pool_size=10,
        max_overflow=10,
        connect_args={"options": "-c jit=off"},
    )


class Database:
    """An engine, its session factory and where its sessions publish background tasks."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = make_engine(url)
        self.sessionmaker = sessionmaker(self.engine, expire_on_commit=False)
        if self.engine.dialect.name == "postgresql":
            event.listen(self.sessionmaker, "after_begin", _limit_statements)

    def set_publisher(self, publisher: Publisher) -> None:
        """Sessions made from now on publish their queued tasks here after commit."""
        self.sessionmaker.configure(info={PUBLISHER: publisher})

    @contextmanager
    def session_scope(self) -> Iterator[Session]:
        """A session that commits (and publishes) at the end of the block, or rolls back."""
        with self.sessionmaker() as session:
            try:
                yield session
                commit(session)
            except BaseException:
                session.rollback()
                raise

    def dispose(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()


STATEMENT_TIMEOUT_MS = "statement_timeout_ms"  # session.info key: a request's sessions have it


def _limit_statements(session: Session, _transaction: Any, connection: Any) -> None:
    """Each transaction of a request's session runs under its statement timeout (Postgres).

    ``SET LOCAL`` ends with the transaction, so a pooled connection goes back unchanged to the
    in-process jobs that share it (workers, migrations and retention run unlimited).
    """
    timeout_ms = session.info.get(STATEMENT_TIMEOUT_MS)
    if timeout_ms:
        connection.execute(
            text("SELECT set_config('statement_timeout', :ms, true)"), {"ms": str(timeout_ms)}
        )


def request_session(database: Database, statement_timeout_s: float) -> Session:
    """A session serving an HTTP request: its statements end after ``statement_timeout_s``."""
    session = database.sessionmaker()
    if statement_timeout_s > 0:
        session.info[STATEMENT_TIMEOUT_MS] = max(1, round(statement_timeout_s * 1000))
    return session


def get_session(request: Request) -> Iterator[Session]:
    """FastAPI dependency: a session for one request; uncommitted work is rolled back."""
    database: Database = request.app.state.database
    timeout_s: float = request.app.state.settings.STATEMENT_TIMEOUT_S
    with request_session(database, timeout_s) as session:
        yield session


SessionDep = Annotated[Session, Depends(get_session)]  # the one session dependency of routes

RETRY_AFTER_S = 5  # how long a client waits before it asks again during a database outage


QUERY_CANCELED = "57014"  # Postgres' SQLSTATE for a statement timeout (or a cancel)


async def database_unavailable(request: Request, exc: Exception) -> JSONResponse:
    """A lost or refused database connection: 503 with Retry-After, not a 500 (logged here).

    A statement over the request's timeout says so: narrowing the request is the remedy.
    """
    if getattr(getattr(exc, "orig", None), "sqlstate", None) == QUERY_CANCELED:
        log.warning("statement timeout on %s %s", request.method, request.url.path)
        timeout_s = request.app.state.settings.STATEMENT_TIMEOUT_S
        return JSONResponse(
            {
                "error": "StatementTimeout",
                "detail": f"the request's query ran longer than the server allows ({timeout_s:g} s"
                ", BENCHWATCH_STATEMENT_TIMEOUT_S): ask for less (fewer runs, days or rows)",
            },
            status_code=503,
            headers={"Retry-After": str(RETRY_AFTER_S)},
        )
    log.warning("database unavailable on %s %s: %s", request.method, request.url.path, exc)
    return JSONResponse(
        {"error": "DatabaseUnavailable", "detail": "the database is not answering: try again"},
        status_code=503,
        headers={"Retry-After": str(RETRY_AFTER_S)},
    )


# What a lost, refused or saturated database raises (psycopg's OperationalError covers a refused
# connection and a cancelled statement; SQLite's, a locked file): the request may be retried.
UNAVAILABLE = (OperationalError, InterfaceError, DisconnectionError, SATimeoutError)
