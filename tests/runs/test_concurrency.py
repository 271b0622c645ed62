"""Concurrent uploads: one run per key, shared catalog rows created once."""

import threading
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import func, select

from app.core.db import Database
from app.models import Benchmark, Result, Run, Series
from app.runs.ingest import ingest_run
from app.runs.schemas import RunIn
from tests.factories import many_results, run_payload

pytestmark = pytest.mark.both_dialects

WORKERS = 6


def in_parallel(work: Callable[[int], Any]) -> list[Any]:
    """Run ``work(i)`` in WORKERS threads released together; collect results or errors."""
    barrier = threading.Barrier(WORKERS)
    outcomes: list[Any] = [None] * WORKERS

    def target(i: int) -> None:
        barrier.wait()
        try:
            outcomes[i] = work(i)
        except Exception as exc:  # reported, not raised, so every thread finishes
            outcomes[i] = exc

    threads = [threading.Thread(target=target, args=(i,)) for i in range(WORKERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return outcomes


def counts(database: Database) -> tuple[int, ...]:
    with database.session_scope() as session:
        return tuple(
            session.scalar(select(func.count()).select_from(m)) or 0
            for m in (Run, Result, Series, Benchmark)
        )


def ingest(database: Database, payload: dict[str, Any]) -> tuple[int, bool]:
    with database.session_scope() as session:
        ingested = ingest_run(session, RunIn.model_validate(payload), source="t")
        return ingested.run.id, ingested.created


def test_concurrent_uploads_of_one_key_create_one_run(database: Database) -> None:
    payload = run_payload("same-key", many_results(200))
    outcomes = in_parallel(lambda _: ingest(database, payload))
    assert not [o for o in outcomes if isinstance(o, Exception)], outcomes
    assert len({run_id for run_id, _ in outcomes}) == 1
    assert sum(created for _, created in outcomes) == 1
    assert counts(database) == (1, 200, 200, 200)


def test_concurrent_runs_share_catalog_rows(database: Database) -> None:
    outcomes = in_parallel(
        lambda i: ingest(database, run_payload(f"k{i}", many_results(200), index=i))
    )
    assert not [o for o in outcomes if isinstance(o, Exception)], outcomes
    assert counts(database) == (WORKERS, WORKERS * 200, 200, 200)
