"""``benchwatch copy``: a SQLite database copied to Postgres (and back) answers the same.

Real services: a SQLite file filled through the API (runs, a detected regression and its alert
group, a subscription, a silence), a fresh Postgres database per test, the real CLI.
"""

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.engine import make_url

from app.core.config import Settings
from app.core.db import Database, utcnow
from app.core.migrate import upgrade_database
from app.main import create_app
from app.notifications.models import Notice
from tests.anomalies.test_service import dynamic_bert_slower, post_history
from tests.conftest import PEPPER, POSTGRES_URL, make_token, service_missing
from tests.factories import case_rows, nightly
from workers.cli import main

PASSWORD = "not-to-be-printed"  # trust auth ignores it; the output must not show it


@pytest.fixture
def empty_postgres_url() -> Iterator[str]:
    """A new Postgres database with no tables, dropped at the end (its URL has a password)."""
    name = f"benchwatch_copy_{uuid.uuid4().hex[:10]}"
    admin = make_url(POSTGRES_URL).set(drivername="postgresql")
    dsn = admin.render_as_string(hide_password=False)
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
    except psycopg.OperationalError as exc:
        service_missing("PostgreSQL", exc)
    url = make_url(POSTGRES_URL).set(database=name, password=PASSWORD)
    yield url.render_as_string(hide_password=False)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def serving(url: str) -> Iterator[TestClient]:
    """A client of the app on the database at ``url``."""
    application = create_app(Settings(DATABASE_URL=url, TOKEN_PEPPER=PEPPER, BROKER_URL=None))
    with TestClient(application) as client:
        yield client
    application.state.database.dispose()


@pytest.fixture
def filled_sqlite(tmp_path: Path) -> tuple[str, dict[str, str]]:
    """A SQLite database filled through the API; its URL and an admin's headers."""
    url = f"sqlite:///{tmp_path / 'source.db'}"
    upgrade_database(url)
    database = Database(url)
    admin = {"Authorization": f"Bearer {make_token(database, 'admin', name='admin')}"}
    ingest = {"Authorization": f"Bearer {make_token(database, 'ingest')}"}
    database.dispose()
    with serving(url) as client:
        post_history(client, ingest, dynamic_bert_slower)
        subscription = {
            "name": "bert owners",
            "match": {"model": "bert"},
            "receivers": [{"kind": "webhook", "url": "https://hooks.example/bert"}],
        }
        made = client.post("/api/v1/subscriptions", json=subscription, headers=admin)
        assert made.status_code == 201, made.text
        made_subscription = made.json()
        silence = {
            "matchers": {"model": "llama"},
            "ends_at": (utcnow() + timedelta(days=3)).isoformat(),
            "comment": "known noisy",
        }
        made = client.post("/api/v1/silences", json=silence, headers=admin)
        assert made.status_code == 201, made.text
        (regression,) = client.get("/api/v1/regressions").json()["items"]
        triaged = client.patch(
            f"/api/v1/regressions/{regression['id']}",
            json={"status": "acknowledged", "note": "bisecting"},
            headers=admin,
        )
        assert triaged.status_code == 200, triaged.text
    digested(url, made_subscription["id"], regression["group_id"])
    return url, admin


def digested(url: str, subscription_id: int, group_id: int) -> None:
    """A notice gathered into a digest with a larger id (a row pointing at a later row)."""
    database = Database(url)
    with database.session_scope() as session:
        common = {"subscription_id": subscription_id, "revision": 1, "group_id": group_id}
        session.add(Notice(id=900, event="digest", event_key="digest:1", state="sent", **common))
        session.flush()
        session.add(
            Notice(
                id=800,
                event="new",
                event_key="g1:new",
                state="digested",
                digest_id=900,
                payload={"findings": [1.5, None], "ok": True},
                **common,
            )
        )
    database.dispose()


def answers(client: TestClient, admin: dict[str, str]) -> dict[str, Any]:
    """The JSON of a handful of reads, by path."""
    runs = client.get("/api/v1/runs", params={"limit": 100}).json()
    (regression,) = client.get("/api/v1/regressions").json()["items"]
    series = regression["series"]["id"]
    newest = max(run["id"] for run in runs["items"])
    subscriptions = client.get("/api/v1/subscriptions", headers=admin).json()
    paths = [
        "/api/v1/runs?limit=100",
        f"/api/v1/runs/{newest}",
        f"/api/v1/runs/{newest - 20}",
        f"/api/v1/series/{series}/points",
        f"/api/v1/series/{series}",
        "/api/v1/regressions",
        "/api/v1/alert-groups",
        f"/api/v1/summary?run_id={newest}",
        "/api/v1/subscriptions",
        f"/api/v1/subscriptions/{subscriptions['items'][0]['id']}/notices",
        "/api/v1/silences",
        "/api/v1/benchmarks?limit=100",
    ]
    found = {}
    for path in paths:
        response = client.get(path, headers=admin)
        assert response.status_code == 200, (path, response.text)
        found[path] = response.json()
    assert len(runs["items"]) == 40
    return found


def copy(source: str, target: str, *flags: str) -> int:
    return main(["copy", "--from", source, "--to", target, *flags])


def test_sqlite_copied_to_postgres_and_back_answers_the_same(
    filled_sqlite: tuple[str, dict[str, str]],
    empty_postgres_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    source, admin = filled_sqlite
    with serving(source) as client:
        before = answers(client, admin)

    assert copy(source, empty_postgres_url) == 0
    out, err = capsys.readouterr()
    assert "verified: every table has as many rows" in out
    assert "result " in out
    assert "rows/s" in out
    assert PASSWORD not in out + err
    with serving(empty_postgres_url) as client:
        assert answers(client, admin) == before
        assert client.get("/api/v1/regressions").json()["items"][0]["status"] == "acknowledged"

    back = f"sqlite:///{tmp_path / 'back' / 'copy.db'}"  # Postgres to a new SQLite file
    assert copy(empty_postgres_url, back) == 0
    with serving(back) as client:
        assert answers(client, admin) == before

    # The ids go on where they stopped (Postgres sequences moved past the copied ids).
    payload = nightly(40, case_rows("bert", "eager", 10.0))
    new_ids = []
    for url in (source, empty_postgres_url):
        database = Database(url)
        ingest = {"Authorization": f"Bearer {make_token(database, 'ingest', name='next')}"}
        database.dispose()
        with serving(url) as client:
            posted = client.post("/api/v1/runs", json=payload, headers=ingest)
            assert posted.status_code == 201, posted.text
            new_ids.append(posted.json()["id"])
    assert (
        new_ids[0]
        == new_ids[1]
        == max(r["id"] for r in before["/api/v1/runs?limit=100"]["items"]) + 1
    )


def test_a_target_with_rows_is_refused_and_a_lost_row_is_named(
    filled_sqlite: tuple[str, dict[str, str]],
    empty_postgres_url: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    source, _ = filled_sqlite
    assert copy(source, empty_postgres_url) == 0
    capsys.readouterr()

    assert copy(source, empty_postgres_url) == 2
    _, err = capsys.readouterr()
    assert "the target database is not empty" in err
    assert "DROP DATABASE" in err
    assert PASSWORD not in err

    assert copy(source, empty_postgres_url, "--verify-only") == 0
    database = Database(empty_postgres_url)
    with database.engine.begin() as conn:
        conn.execute(text("DELETE FROM silence"))
    database.dispose()
    assert copy(source, empty_postgres_url, "--verify-only") == 1
    _, err = capsys.readouterr()
    assert "table silence has 1 rows in the source and 0 in the target" in err
    assert "table result" not in err


def test_a_source_not_at_the_newest_schema_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = f"sqlite:///{tmp_path / 'old.db'}"
    upgrade_database(old, "8783272ee5a6")  # the first migration
    target = tmp_path / "new.db"
    assert copy(old, f"sqlite:///{target}") == 2
    assert "benchwatch migrate" in capsys.readouterr().err
    assert not target.exists()  # nothing was written

    assert copy(f"sqlite:///{tmp_path / 'typo.db'}", f"sqlite:///{target}") == 2
    assert "does not exist" in capsys.readouterr().err
    assert not (tmp_path / "typo.db").exists()

    upgrade_database(old)
    assert copy(old, f"sqlite:///{tmp_path}/../{tmp_path.name}/old.db") == 2
    assert "name the same database" in capsys.readouterr().err

    missing = make_url(POSTGRES_URL).set(database="benchwatch_no_such_db", password=PASSWORD)
    assert copy(old, missing.render_as_string(hide_password=False)) == 2
    err = capsys.readouterr().err
    assert "benchwatch copy: OperationalError" in err  # one line, not a traceback
    assert PASSWORD not in err
