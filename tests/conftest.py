"""Shared fixtures: a database test runs on SQLite or on the real Postgres, or on both.

A test marked ``both_dialects`` (bounds, bad input, locking, SQL that differs by dialect) runs
once on each. Any other database test exercises no difference between them and runs on one,
the same one every time, picked by its name: the suite as a whole still runs each feature on
both. ``BENCHWATCH_TEST_DIALECTS=both`` runs every database test on each dialect.
"""

import os
import re
import socket
import threading
import time
import urllib.request
import uuid
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
import redis
import uvicorn
from fastapi.testclient import TestClient
from sqlalchemy import Connection, text
from sqlalchemy.engine import make_url
from starlette.types import ASGIApp

import app.models  # noqa: F401
from app.core.config import Settings
from app.core.db import Base, Database
from app.core.migrate import upgrade_database
from app.main import create_app
from app.runtime import install_listeners
from app.tokens import service as tokens_service
from tests.shared_routes import share_built_routes

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
POSTGRES_URL = os.environ.get(
    "BENCHWATCH_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)


def _own_redis_database(url: str) -> str:
    """``url`` with a database number of this pytest-xdist worker's own (15, 14, ... down)."""
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
    base, _, number = url.rpartition("/")
    return f"{base}/{(int(number or 0) - worker) % 16}"


REDIS_URL = _own_redis_database(
    os.environ.get("BENCHWATCH_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
)
PEPPER = "test-pepper"
# What every benchwatch process installs as it starts (notice planning, catalog tokens): the
# tests that write through sessions of their own rely on it as the server does.
install_listeners()
share_built_routes()
# The test data is dated (tests.factories.START, 2026-01; real files from 2019 on): the run
# time window of tokens without admin would refuse it as the calendar moves on. Its own
# tests set the window (tests/runs/test_run_time.py); any Settings built here reads this.
os.environ.setdefault("BENCHWATCH_RUN_TIME_BACK_DAYS", str(100 * 366))
# The tests read anonymously from one address ("testclient"), hundreds of times in some: the
# anonymous rate limit is off in them, on in its own tests (tests/test_ratelimit.py).
os.environ.setdefault("BENCHWATCH_ANON_RATE_LIMIT", "0")
STARTUP_TIMEOUT_S = 10.0


def _hosts_file_names(path: str = "/etc/hosts") -> frozenset[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as hosts:
            lines = [line.partition("#")[0].split()[1:] for line in hosts]
    except OSError:
        lines = []
    return frozenset(name.lower() for names in lines for name in names) | {"localhost"}


def resolving_locally(lookup: Callable[..., Any], known: frozenset[str]) -> Callable[..., Any]:
    """``lookup`` (``socket.getaddrinfo``) for addresses and the hosts file's names; any other
    name does not resolve, at once.

    The tests reach nothing beyond this machine, so a name the hosts file lacks cannot mean
    anything to them; yet the machine's DNS server leaves some names unanswered for 5 s, and
    the SSRF guard waits its 3 s for each: the API fuzz, whose receiver URLs carry random
    host names, spent minutes there. What the guard does with a name that does not resolve,
    and with a lookup that hangs (tests/notifications/test_outbound.py), is tested as before.
    """

    def getaddrinfo(
        host: Any, port: Any, family: int = 0, type: int = 0, proto: int = 0, flags: int = 0
    ) -> Any:
        name = host.decode("ascii", "replace") if isinstance(host, bytes) else host
        if name is None or name.lower().rstrip(".") in known:
            return lookup(host, port, family, type, proto, flags)
        try:
            return lookup(host, port, family, type, proto, flags | socket.AI_NUMERICHOST)
        except (socket.gaierror, UnicodeError):
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known") from None

    getaddrinfo.resolves_locally = True  # type: ignore[attr-defined]
    return getaddrinfo


if not hasattr(socket.getaddrinfo, "resolves_locally"):
    socket.getaddrinfo = resolving_locally(socket.getaddrinfo, _hosts_file_names())


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slow end-to-end tests first: on several workers (make test) they start at once,
    instead of one of them running alone at the end."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def service_missing(what: str, exc: Exception) -> None:
    """Fail in CI (a missing service is a broken setup), skip with the reason elsewhere."""
    message = f"{what} is not reachable ({type(exc).__name__}: {exc})"
    if IN_CI:
        pytest.fail(message)
    pytest.skip(message)


def _psycopg_dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A fresh, migrated Postgres database for this test session, dropped at the end."""
    name = f"benchwatch_test_{uuid.uuid4().hex[:10]}"
    admin = _psycopg_dsn(POSTGRES_URL)
    try:
        with psycopg.connect(admin, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
            # A test database needs no durability: commits do not wait for the WAL to reach
            # the disk (for this database only; the server's settings stay as they are).
            conn.execute(f'ALTER DATABASE "{name}" SET synchronous_commit TO off')
    except psycopg.OperationalError as exc:
        service_missing("PostgreSQL", exc)
    url = make_url(POSTGRES_URL).set(database=name).render_as_string(hide_password=False)
    upgrade_database(url)
    yield url
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def sqlite_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A migrated SQLite file for this test session."""
    url = f"sqlite:///{tmp_path_factory.mktemp('db') / 'benchwatch.db'}"
    upgrade_database(url)
    return url


DIALECTS = ("sqlite", "postgres")
EVERY_TEST_ON_BOTH = os.environ.get("BENCHWATCH_TEST_DIALECTS", "") == "both"


def dialects_of(test: pytest.Item) -> tuple[str, ...]:
    """The dialects a database test runs on: both when marked so, else one picked by name."""
    if EVERY_TEST_ON_BOTH or test.get_closest_marker("both_dialects"):
        return DIALECTS
    return (DIALECTS[zlib.crc32(test.nodeid.encode()) % len(DIALECTS)],)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize each database test by its dialects, unless it names them itself."""
    if "database_url" not in metafunc.fixturenames:
        return
    for mark in metafunc.definition.iter_markers("parametrize"):
        names = mark.args[0]
        if "database_url" in (
            names.replace(" ", "").split(",") if isinstance(names, str) else names
        ):
            return
    metafunc.parametrize("database_url", dialects_of(metafunc.definition), indirect=True)


@pytest.fixture
def database_url(request: pytest.FixtureRequest) -> str:
    """The URL of a migrated database of the dialect the test is parametrized with."""
    fixture = "postgres_url" if request.param == "postgres" else "sqlite_url"
    url: str = request.getfixturevalue(fixture)
    return url


def filled_tables(conn: Connection, tables: list[str]) -> set[str]:
    """Which of ``tables`` hold a row, in one query."""
    holding = " UNION ALL ".join(
        f"SELECT '{table}' WHERE EXISTS (SELECT 1 FROM {table})" for table in tables
    )
    return set(conn.execute(text(holding)).scalars())


def _empty(database: Database) -> None:
    """Delete every row the last test left, children first; on Postgres, restart the ids.

    Only the tables holding rows are touched, found in one query: a TRUNCATE of all of them
    (175 relations with their indexes and partitions) cost a third of a second per test.
    """
    # The catalog generation row stays: emptying the catalog changes its token (triggers).
    tables = [
        t.name for t in reversed(Base.metadata.sorted_tables) if t.name != "catalog_generation"
    ]
    with database.engine.begin() as conn:
        if database.engine.dialect.name != "postgresql":
            for table in tables:
                conn.execute(text(f"DELETE FROM {table}"))
            return
        filled = filled_tables(conn, tables)
        for table in tables:  # dependents before what they reference
            if table in filled:
                conn.execute(text(f"DELETE FROM {table}"))
        used = conn.execute(
            text(
                "SELECT schemaname || '.' || sequencename FROM pg_sequences "
                "WHERE schemaname = current_schema() AND last_value IS NOT NULL"
            )
        ).scalars()
        for sequence in used:
            conn.execute(text("SELECT setval(:sequence, 1, false)"), {"sequence": sequence})


@pytest.fixture
def database(database_url: str) -> Iterator[Database]:
    """A Database on an emptied schema."""
    db = Database(database_url)
    _empty(db)
    yield db
    db.dispose()


# The periodic sweeps of a test's app run when the test means them to: each starts with the
# app, and those first sweeps were a good part of the time of tests that read and write
# through the API (and raced with what the test did). Their own tests start them or call them
# (tests/test_jobs.py, tests/anomalies/test_detection_faults.py, test_celery_delivery.py).
NO_SWEEPS: dict[str, Any] = {
    "DETECTION_SWEEP_S": 0.0,
    "SILENCE_SWEEP_S": 0.0,
    "NOTIFY_SWEEP_S": 0.0,
    "GITHUB_POLL_S": 0.0,
}


@pytest.fixture
def settings(database: Database) -> Settings:
    """Settings pointing at the test database, its app's periodic sweeps off."""
    return Settings(DATABASE_URL=database.url, TOKEN_PEPPER=PEPPER, BROKER_URL=None, **NO_SWEEPS)


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    """An HTTP client of a fresh app on the test database."""
    application = create_app(settings)
    with TestClient(application) as test_client:
        yield test_client
    application.state.database.dispose()


@pytest.fixture
def redis_url() -> str:
    """The test Redis database, emptied; fails in CI (skips elsewhere) when Redis is down."""
    try:
        client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2)
        client.flushdb()
    except redis.RedisError as exc:
        service_missing("Redis", exc)
    return REDIS_URL


@pytest.fixture
def postgres_database(postgres_url: str) -> Iterator[Database]:
    """The Postgres test database alone (for tests that need its server-side features)."""
    db = Database(postgres_url)
    _empty(db)
    yield db
    db.dispose()


def make_token(database: Database, *scopes: str, name: str = "ci") -> str:
    """A new token with these scopes; returns its plain text."""
    with database.session_scope() as session:
        _, plain = tokens_service.create_token(session, name, list(scopes), PEPPER)
    return plain


def sign_in(client: TestClient, database: Database, *scopes: str) -> str:
    """Sign a page client in with a new token of ``scopes``; the CSRF value of its pages."""
    token = make_token(database, *scopes, name="-".join(scopes))
    answer = client.post("/login", data={"token": token}, follow_redirects=False)
    assert answer.status_code == 303, answer.text
    found = re.search(r'<meta name="csrf-token" content="([^"]+)">', client.get("/").text)
    assert found, "the page carries no CSRF value: not signed in?"
    return found.group(1)


@pytest.fixture
def ingest_headers(database: Database) -> dict[str, str]:
    """Authorization headers of a token with scope ``ingest``."""
    return {"Authorization": f"Bearer {make_token(database, 'ingest')}"}


def _wait_until_healthy(base_url: str, thread: threading.Thread) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while True:
        try:
            with urllib.request.urlopen(f"{base_url}/healthz", timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:  # refused, reset or timed out while uvicorn starts
            pass
        if not thread.is_alive():
            pytest.fail("the test server exited during start-up")
        if time.monotonic() > deadline:
            pytest.fail(f"the test server did not answer {base_url}/healthz")
        time.sleep(0.02)


@pytest.fixture
def live_settings(settings: Settings) -> Settings:
    """The live server's settings (a test module overrides this fixture to change them)."""
    return settings


@contextmanager
def serving(application: ASGIApp) -> Iterator[str]:
    """``application`` served by uvicorn on a free port in a thread; yields its URL."""
    config = uvicorn.Config(
        application,
        lifespan="on",
        ws="none",  # uvicorn's websockets support imports deprecated APIs; pages need none
        log_level="warning",
        log_config=None,  # leave the test process's logging alone
        timeout_graceful_shutdown=5,
    )
    server = uvicorn.Server(config)
    # Bound here, handed to uvicorn: no race between picking a free port and listening on it.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    base_url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        _wait_until_healthy(base_url, thread)
        yield base_url
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
    assert not thread.is_alive(), "the test server did not shut down"


@pytest.fixture
def live_server(live_settings: Settings) -> Iterator[str]:
    """The real app on the test database, served by uvicorn on a free port; yields its URL."""
    application = create_app(live_settings)
    try:
        with serving(application) as base_url:
            yield base_url
    finally:
        application.state.database.dispose()
