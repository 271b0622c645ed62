"""Migrations build exactly the models' schema on both dialects, and go down and up again."""

import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import make_url

from app.core.config import Settings
from app.core.copy import partition_names
from app.core.db import Base, Database
from app.core.migrate import is_up_to_date, upgrade_database
from app.main import create_app
from tests.anomalies.test_service import dynamic_bert_slower, post_history
from tests.conftest import PEPPER, POSTGRES_URL, make_token, service_missing

pytestmark = pytest.mark.both_dialects


def test_schema_matches_models(database: Database) -> None:
    with database.engine.connect() as connection:
        partitions = partition_names(connection)  # Postgres: parts of ``result``, not tables

        def ours(name: str | None, kind: str, parents: dict[str, str | None]) -> bool:
            return (parents.get("table_name") or name) not in partitions

        opts = {"compare_type": True, "include_name": ours}
        context = MigrationContext.configure(connection, opts=opts)
        assert compare_metadata(context, Base.metadata) == []
    assert is_up_to_date(database.engine)


def test_down_and_up_again(tmp_path: object) -> None:
    url = f"sqlite:///{tmp_path}/cycle.db"
    upgrade_database(url)
    from alembic import command

    from app.core.migrate import alembic_config

    command.downgrade(alembic_config(url), "base")
    engine = create_engine(url)
    assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
    assert not is_up_to_date(engine)
    upgrade_database(url)
    assert is_up_to_date(engine)
    engine.dispose()


@pytest.fixture(params=["sqlite", "postgres"])
def scratch_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database of this test's own (migrations go down and up; no other test may share it)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/cycle.db"
        return
    name = f"benchwatch_mig_{uuid.uuid4().hex[:10]}"
    admin = make_url(POSTGRES_URL).set(drivername="postgresql").render_as_string(False)
    try:
        with psycopg.connect(admin, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
    except psycopg.OperationalError as exc:
        service_missing("PostgreSQL", exc)
    yield make_url(POSTGRES_URL).set(database=name).render_as_string(False)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# Rows that every revision since the first has kept, counted before and after each cycle.
KEPT = ("machine", "environment", "run", "benchmark", "series", "result", "api_token")


def _counts(url: str) -> dict[str, int]:
    engine = create_engine(url)
    with engine.connect() as connection:
        counts = {
            t: connection.execute(text(f"SELECT count(*) FROM {t}")).scalar_one() for t in KEPT
        }
    engine.dispose()
    return counts


def test_every_migration_goes_down_and_up_again_with_data_present(scratch_url: str) -> None:
    """Each downgrade and the upgrade after it keep the rows a live deployment has."""
    from alembic import command
    from alembic.script import ScriptDirectory

    from app.core.migrate import alembic_config

    upgrade_database(scratch_url)
    application = create_app(
        Settings(DATABASE_URL=scratch_url, TOKEN_PEPPER=PEPPER, BROKER_URL=None)
    )
    with TestClient(application) as client:
        headers = {"Authorization": f"Bearer {make_token(application.state.database, 'ingest')}"}
        post_history(client, headers, dynamic_bert_slower)
        group = client.get("/api/v1/alert-groups").json()["items"][0]["id"]
        triage = {"Authorization": f"Bearer {make_token(application.state.database, 'triage')}"}
        change = {"status": "acknowledged", "bug_url": "https://bugs.example/1"}
        assert client.patch(f"/api/v1/alert-groups/{group}", json=change, headers=triage).is_success
        assert client.post("/login", data={"token": triage["Authorization"][7:]}).is_success
    application.state.database.dispose()
    before = _counts(scratch_url)
    assert before["result"] > 0

    config = alembic_config(scratch_url)
    revisions = [r.revision for r in ScriptDirectory.from_config(config).walk_revisions()]
    # One step at a time, each migration once down and once up with the rows in place (not
    # down to each revision and back to the head: that ran every migration again per step).
    for revision in revisions[1:]:  # newest first; down to the first revision, which stays
        command.downgrade(config, revision)
        assert _counts(scratch_url) == before, f"rows lost going down to {revision}"
    for revision in reversed(revisions[:-1]):
        command.upgrade(config, revision)
        assert _counts(scratch_url) == before, f"rows lost coming back up to {revision}"
    engine = create_engine(scratch_url)
    assert is_up_to_date(engine)
    engine.dispose()


def _keys(url: str) -> set[tuple[str, str]]:
    engine = create_engine(url)
    with engine.connect() as connection:
        rows = connection.execute(text("SELECT project, key FROM run"))
        keys = {(str(project), str(key)) for project, key in rows}
    engine.dispose()
    return keys


def test_run_identity_splits_project_prefixed_keys(scratch_url: str) -> None:
    """Down to before (project, key): the prefixes come back; up again: split, only our own."""
    from alembic import command

    from app.core.migrate import alembic_config
    from tests.factories import result, run_payload

    upgrade_database(scratch_url)
    application = create_app(
        Settings(DATABASE_URL=scratch_url, TOKEN_PEPPER=PEPPER, BROKER_URL=None)
    )
    with TestClient(application) as client:
        headers = {"Authorization": f"Bearer {make_token(application.state.database, 'ingest')}"}
        for project, key in (("vision", "gha-1"), ("a:b", "c"), ("speech", "k"), ("default", "d")):
            payload = run_payload(key, [result(value=1.0)], project=project)
            assert client.post("/api/v1/runs", json=payload, headers=headers).status_code == 201
    application.state.database.dispose()

    config = alembic_config(scratch_url)
    command.downgrade(config, "6d2f9b4e8a17")  # before this revision: one key over projects
    assert _keys(scratch_url) == {
        ("vision", "vision:gha-1"),
        ("a:b", "a:b:c"),
        ("speech", "speech:k"),
        ("default", "d"),
    }
    engine = create_engine(scratch_url)
    with engine.begin() as connection:  # keys a client may have sent as they were
        connection.execute(text("UPDATE run SET key = 'other:k' WHERE project = 'speech'"))
        connection.execute(text("UPDATE run SET key = 'vision:gha-1x' WHERE project = 'default'"))
    engine.dispose()
    upgrade_database(scratch_url)
    assert _keys(scratch_url) == {
        ("vision", "gha-1"),
        ("a:b", "c"),
        ("speech", "other:k"),  # another project's prefix: the client's own text
        ("default", "vision:gha-1x"),  # a default run's key is never split
    }
    engine = create_engine(scratch_url)
    with engine.connect() as connection:
        uniques = inspect(connection).get_unique_constraints("run")
    engine.dispose()
    assert [u["column_names"] for u in uniques] == [["project", "key"]]


def test_feed_tokens_not_kept_strips_the_plain_token(scratch_url: str) -> None:
    """A row stored before e5a7c9d10027 with its feed's token in its receivers keeps the hash."""
    import hashlib
    import json

    from alembic import command

    from app.core.migrate import alembic_config

    config = alembic_config(scratch_url)
    command.upgrade(config, "d4f6b8c00026")
    token = "t" * 32
    receivers = [{"kind": "feed", "token": token}, {"kind": "email", "to": ["a@example.com"]}]
    engine = create_engine(scratch_url)
    with engine.begin() as connection:
        for name, digest in (("hashed", hashlib.sha256(token.encode()).hexdigest()), ("no", None)):
            connection.execute(
                text(
                    'INSERT INTO subscription (name, owner, match, exclude, receivers, "when",'
                    " paused, revision, source, feed_token, created_at, updated_at) VALUES"
                    " (:name, '', '{}', '[]', :receivers, '\"immediate\"', false, 1, 'api',"
                    " :digest, '2026-12-01 00:00:00', '2026-12-01 00:00:00')"
                ),
                {
                    "name": name,
                    "digest": digest,
                    "receivers": json.dumps(receivers).replace(
                        token, token if digest else "u" * 32
                    ),
                },
            )
    upgrade_database(scratch_url)
    with engine.connect() as connection:
        rows = connection.execute(text("SELECT name, receivers, feed_token FROM subscription"))
        found = {name: (str(kept), digest) for name, kept, digest in rows}
    engine.dispose()
    assert set(found) == {"hashed", "no"}
    for name, plain in (("hashed", token), ("no", "u" * 32)):
        kept, digest = found[name]
        assert plain not in kept
        assert "email" in kept
        assert digest == hashlib.sha256(plain.encode()).hexdigest()


def test_result_spread_is_filled_for_the_results_stored_before(scratch_url: str) -> None:
    """Down to before ``result.spread``, then up: each ok result with samples gets its spread."""
    from alembic import command

    from app.core.migrate import alembic_config
    from tests.factories import result, run_payload

    upgrade_database(scratch_url)
    application = create_app(
        Settings(DATABASE_URL=scratch_url, TOKEN_PEPPER=PEPPER, BROKER_URL=None)
    )
    with TestClient(application) as client:
        headers = {"Authorization": f"Bearer {make_token(application.state.database, 'ingest')}"}
        rows = [
            result(value=10.0, samples=[9.0, 10.0, 11.0, 10.0]),
            result(metric="peak_memory", value=4.0, samples=[4.0, 4.0]),  # too few samples
        ]
        assert client.post("/api/v1/runs", json=run_payload("s", rows), headers=headers).is_success
    application.state.database.dispose()
    command.downgrade(alembic_config(scratch_url), "f2b4d6e80034")
    upgrade_database(scratch_url)
    engine = create_engine(scratch_url)
    with engine.connect() as connection:
        spreads = sorted(
            (value, spread)
            for value, spread in connection.execute(text("SELECT value, spread FROM result"))
        )
    engine.dispose()
    assert spreads == [(4.0, None), (10.0, pytest.approx(0.05))]  # MAD 0.5 over median 10
