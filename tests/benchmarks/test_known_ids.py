"""Remembered catalog ids: used when the catalog is unchanged, forgotten when they may be wrong.

Each test checks what matters to a user: every stored result sits in the series of the
benchmark and metric its payload named, whatever happened to the catalog in between.
"""

import re
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import delete, event, func, select, text

from app.benchmarks import known_ids
from app.benchmarks.known_ids import KnownIds
from app.core.db import Database
from app.models import Benchmark, CatalogGeneration, CompilerConfig, Metric, Result, Series
from app.runs.ingest import ingest_run
from app.runs.schemas import RunIn
from tests.factories import many_results, result, run_payload


def ingest(database: Database, key: str, rows: list[dict[str, Any]], index: int = 0) -> int:
    with database.session_scope() as session:
        run_in = RunIn.model_validate(run_payload(key, rows, index=index))
        return ingest_run(session, run_in, source="t").run.id


def stored_cases(database: Database, run_id: int) -> set[tuple[str, str, str, float | None]]:
    """(model, config, metric, value) of each of a run's results, read through its series."""
    with database.session_scope() as session:
        query = (
            select(Benchmark.model, CompilerConfig.name, Metric.name, Result.value)
            .join(Series, Result.series_id == Series.id)
            .join(Benchmark, Series.benchmark_id == Benchmark.id)
            .join(CompilerConfig, Benchmark.compiler_config_id == CompilerConfig.id)
            .join(Metric, Series.metric_id == Metric.id)
            .where(Result.run_id == run_id)
        )
        cases = {
            (model, config, metric, value)
            for model, config, metric, value in session.execute(query)
        }
        count = session.scalar(select(func.count()).where(Result.run_id == run_id))
    assert len(cases) == count, "results whose series or benchmark is gone"
    return cases


def posted(rows: list[dict[str, Any]]) -> set[tuple[str, str, str, float | None]]:
    return {(r["model"], r["config"], r["metric"], r["value"]) for r in rows}


@contextmanager
def statements(database: Database) -> Iterator[list[str]]:
    """The SQL the database's engine runs inside the block, detection jobs' aside."""
    seen: list[str] = []

    def record(*args: Any) -> None:
        if not threading.current_thread().name.startswith("benchwatch-job"):
            seen.append(args[2])

    event.listen(database.engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(database.engine, "before_cursor_execute", record)


def catalog_reads(sql: list[str]) -> list[str]:
    return [s for s in sql if "FROM benchmark" in s or "FROM series" in s]


def test_an_unchanged_catalog_is_not_read_again(database: Database) -> None:
    rows = many_results(40)
    ingest(database, "first", rows)  # creates the catalog: nothing remembered under its token
    ingest(database, "second", rows, index=1)  # reads the ids, remembers them
    with statements(database) as sql:
        third = ingest(database, "third", rows, index=2)
    assert catalog_reads(sql) == []
    assert stored_cases(database, third) == posted(rows)


def test_an_upload_of_known_cases_reads_each_row_once(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    """Through HTTP, response included: the run's machine and environment are read once."""
    rows = many_results(40)
    for index in range(2):
        payload = run_payload(f"run-{index}", rows, index=index)
        assert client.post("/api/v1/runs", json=payload, headers=ingest_headers).status_code == 201
    with statements(client.app.state.database) as sql:  # type: ignore[attr-defined]
        payload = run_payload("run-2", rows, index=2)
        response = client.post("/api/v1/runs", json=payload, headers=ingest_headers)
    assert response.status_code == 201
    assert response.json()["machine"]["name"] == "h100-8"
    assert catalog_reads(sql) == []
    for table in ("machine", "environment"):  # (not machine_silence, which detection reads)
        assert len([s for s in sql if re.search(rf"FROM {table}\b", s)]) == 1, sql


def test_creating_catalog_rows_changes_the_token(database: Database) -> None:
    with database.session_scope() as session:
        before = session.scalar(select(CatalogGeneration.token))
    ingest(database, "first", many_results(4))
    with database.session_scope() as session:
        after = session.scalar(select(CatalogGeneration.token))
    assert before
    assert after != before
    ingest(database, "second", many_results(4), index=1)  # same cases: nothing created
    with database.session_scope() as session:
        assert session.scalar(select(CatalogGeneration.token)) == after


def test_deleted_series_are_created_again_not_reused(database: Database) -> None:
    rows = many_results(8)
    ingest(database, "first", rows)
    ingest(database, "second", rows, index=1)  # ids remembered
    with database.session_scope() as session:
        gone = session.scalars(select(Series.id).order_by(Series.id).limit(3)).all()
        session.execute(delete(Result).where(Result.series_id.in_(gone)))
        session.execute(delete(Series).where(Series.id.in_(gone)))
    third = ingest(database, "third", rows, index=2)
    assert stored_cases(database, third) == posted(rows)
    with database.session_scope() as session:
        assert len(session.scalars(select(Series.id)).all()) == len(rows)


def test_an_emptied_catalog_is_not_mistaken_for_the_old_one(database: Database) -> None:
    old = many_results(8)
    ingest(database, "first", old)
    ingest(database, "second", old, index=1)  # ids remembered
    with database.engine.begin() as connection:
        if database.engine.dialect.name == "postgresql":
            connection.execute(
                text("TRUNCATE result, run, series, benchmark RESTART IDENTITY CASCADE")
            )
        else:
            for table in ("result", "run", "series", "benchmark"):
                connection.execute(text(f"DELETE FROM {table}"))
    other = [result(model=f"other_{i}", value=float(i + 1)) for i in range(8)]
    ingest(database, "other", other)  # takes the ids the old catalog had (Postgres)
    again = ingest(database, "again", old, index=1)
    assert stored_cases(database, again) == posted(old)


def test_a_restored_dump_is_not_mistaken_for_the_live_catalog(postgres_database: Database) -> None:
    """A dump restored under a running server lacks the ids created since, and reuses them."""
    database = postgres_database
    dumped = many_results(8)
    ingest(database, "dumped", dumped)
    with database.session_scope() as session:
        token = session.scalar(select(CatalogGeneration.token))
        series_seq = session.scalar(text("SELECT last_value FROM series_id_seq"))
        benchmark_seq = session.scalar(text("SELECT last_value FROM benchmark_id_seq"))
    later = [result(model=f"later_{i}", value=float(i + 1)) for i in range(8)]
    ingest(database, "later", later)
    ingest(database, "later-again", later, index=1)  # ids remembered
    with database.engine.begin() as connection:  # what restoring the dump leaves behind
        connection.execute(text("SET LOCAL session_replication_role = replica"))  # no triggers
        later_runs = "SELECT id FROM run WHERE key LIKE 'later%'"
        later_benchmarks = "SELECT id FROM benchmark WHERE model LIKE 'later%'"
        connection.execute(text(f"DELETE FROM result WHERE run_id IN ({later_runs})"))
        connection.execute(text(f"DELETE FROM series WHERE benchmark_id IN ({later_benchmarks})"))
        connection.execute(text("DELETE FROM run WHERE key LIKE 'later%'"))
        connection.execute(text("DELETE FROM benchmark WHERE model LIKE 'later%'"))
        connection.execute(text(f"SELECT setval('series_id_seq', {series_seq})"))
        connection.execute(text(f"SELECT setval('benchmark_id_seq', {benchmark_seq})"))
        connection.execute(text("UPDATE catalog_generation SET token = :token"), {"token": token})
    newer = [result(model=f"newer_{i}", value=float(i + 1)) for i in range(8)]
    ingest(database, "newer", newer)  # takes the ids "later" had
    again = ingest(database, "later-once-more", later, index=2)
    assert stored_cases(database, again) == posted(later)


def test_without_a_generation_row_nothing_is_remembered(database: Database) -> None:
    rows = many_results(8)
    with database.session_scope() as session:
        session.execute(delete(CatalogGeneration))
    try:
        ingest(database, "first", rows)
        ingest(database, "second", rows, index=1)
        with statements(database) as sql:
            third = ingest(database, "third", rows, index=2)
        assert catalog_reads(sql), "ids were used with nothing to tell when they go wrong"
        assert stored_cases(database, third) == posted(rows)
    finally:
        with database.session_scope() as session:
            session.add(CatalogGeneration(id=1, token=secrets.token_hex(16)))


def test_over_the_limit_everything_is_forgotten(database: Database) -> None:
    cache = KnownIds(limit=5)
    reads: list[list[int]] = []

    def find(keys: list[int]) -> dict[int, int]:
        reads.append(keys)
        return {k: k * 10 for k in keys}

    with database.session_scope() as session:
        assert cache.ids(session, "s", [1, 2, 3], find) == {1: 10, 2: 20, 3: 30}
        assert cache.ids(session, "s", [1, 2, 3], find) == {1: 10, 2: 20, 3: 30}
        assert reads == [[1, 2, 3]]
        cache.ids(session, "t", [7, 8, 9], find)  # 6 > 5: the first three are forgotten
        cache.ids(session, "s", [1], find)
        assert reads == [[1, 2, 3], [7, 8, 9], [1]]


def test_publishing_without_changes_writes_nothing(database: Database) -> None:
    with database.session_scope() as session, statements(database) as sql:
        known_ids.publish_changes(session)
    assert not [s for s in sql if "catalog_generation" in s]


@pytest.fixture(autouse=True)
def _fresh_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with nothing remembered, as a newly started server does."""
    monkeypatch.setattr(known_ids, "KNOWN", KnownIds())
