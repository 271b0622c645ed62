"""A request's statements on Postgres end after BENCHWATCH_STATEMENT_TIMEOUT_S, answered 503."""

import time

from fastapi.testclient import TestClient
from sqlalchemy import text

from app.core.config import Settings
from app.core.db import Database, SessionDep
from app.main import create_app
from tests.conftest import PEPPER


def test_a_request_query_over_the_timeout_is_a_503_and_jobs_run_unlimited(
    postgres_database: Database,
) -> None:
    settings = Settings(
        DATABASE_URL=postgres_database.url,
        TOKEN_PEPPER=PEPPER,
        BROKER_URL=None,
        STATEMENT_TIMEOUT_S=0.3,
    )
    application = create_app(settings)

    # A route as every read has it: its session from the one request session dependency.
    @application.get("/api/v1/slow")
    def slow(session: SessionDep) -> dict[str, str]:
        session.execute(text("SELECT pg_sleep(2)"))
        return {"status": "slept"}

    database: Database = application.state.database
    with TestClient(application) as client:
        started = time.monotonic()
        answer = client.get("/api/v1/slow")
        took = time.monotonic() - started
        assert answer.status_code == 503, answer.text  # before: 200 after the whole 2 s
        assert answer.json()["error"] == "StatementTimeout"
        assert "BENCHWATCH_STATEMENT_TIMEOUT_S" in answer.json()["detail"]
        assert answer.headers["Retry-After"]
        assert took < 1.5
        # The pool's connections go back unlimited: a job's session (session_scope) sleeps.
        with database.session_scope() as session:
            assert session.scalar(text("SHOW statement_timeout")) == "0"
            session.execute(text("SELECT pg_sleep(0.5)"))
        assert client.get("/healthz").status_code == 200
    database.dispose()


def test_no_timeout_when_it_is_off(postgres_database: Database) -> None:
    settings = Settings(
        DATABASE_URL=postgres_database.url, TOKEN_PEPPER=PEPPER, STATEMENT_TIMEOUT_S=0
    )
    application = create_app(settings)

    @application.get("/api/v1/timeout")
    def timeout(session: SessionDep) -> dict[str, str]:
        return {"timeout": str(session.scalar(text("SHOW statement_timeout")))}

    with TestClient(application) as client:
        assert client.get("/api/v1/timeout").json() == {"timeout": "0"}
    application.state.database.dispose()
