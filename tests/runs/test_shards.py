"""Sharded runs: the jobs of one workflow make one run; branches are kept apart."""

import itertools
import threading
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.core.db import Database, utcnow
from app.models import Result, Run
from app.runs import shards
from app.runs.branches import branch_channel
from tests.anomalies.test_service import post_history, regressions
from tests.factories import case_rows, nightly, result, run_payload
from tests.posting import drain
from tests.runs.test_concurrency import in_parallel

pytestmark = pytest.mark.both_dialects

MODELS = ("resnet50", "bert", "llama", "vit", "t5", "gpt2")


def shard(
    name: str, models: tuple[str, ...], expected: int | None = 3, **fields: Any
) -> dict[str, Any]:
    fields = {"commit": "abc123", **fields}
    return run_payload(
        "gha-1234-1",
        [result(model=m, value=1.0 + i) for i, m in enumerate(models)],
        shard={"name": name, "expected": expected},
        **fields,
    )


SHARDS = {
    "shard-1": shard("shard-1", MODELS[:2]),
    "shard-2": shard("shard-2", MODELS[2:4]),
    "shard-3": shard("shard-3", MODELS[4:]),
}


def post(client: TestClient, headers: dict[str, str], payload: dict[str, Any]) -> Any:
    response = client.post("/api/v1/runs", json=payload, headers=headers)
    drain(client)
    return response


@pytest.mark.parametrize("order", list(itertools.permutations(SHARDS))[::2])
def test_three_shards_in_any_order_with_retries_make_one_run(
    client: TestClient, ingest_headers: dict[str, str], order: tuple[str, ...]
) -> None:
    first, second, last = (SHARDS[name] for name in order)
    created = post(client, ingest_headers, first)
    assert created.status_code == 201
    run = created.json()
    assert (run["status"], run["expected_shards"]) == ("partial", 3)
    assert post(client, ingest_headers, first).status_code == 200  # a retried job
    assert post(client, ingest_headers, second).status_code == 201
    partial = client.get(f"/api/v1/runs/{run['id']}").json()
    assert partial["status"] == "partial"
    assert partial["detected_at"] is None  # detection waits for the whole run
    assert post(client, ingest_headers, last).status_code == 201
    assert post(client, ingest_headers, second).status_code == 200

    whole = client.get(f"/api/v1/runs/{run['id']}").json()
    assert whole["status"] == "completed"
    assert whole["detected_at"] is not None
    assert whole["result_count"] == len(MODELS)
    assert whole["coverage"]["attempted"] == len(MODELS)
    assert sorted(r["model"] for r in whole["results"]) == sorted(MODELS)
    assert len(client.get("/api/v1/runs").json()["items"]) == 1


def test_a_shard_is_refused_when_it_changes_or_does_not_belong(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    assert post(client, ingest_headers, SHARDS["shard-1"]).status_code == 201
    changed = shard("shard-1", ("resnet50", "vit"))
    response = post(client, ingest_headers, changed)
    assert response.status_code == 409
    assert "already holds shard 'shard-1'" in response.json()["detail"]
    other_commit = shard("shard-2", MODELS[2:4], commit="fff999")
    response = post(client, ingest_headers, other_commit)
    assert response.status_code == 409
    assert "commit 'abc123'" in response.json()["detail"]


def test_a_workflow_on_two_machines_makes_a_run_on_each(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    h100 = post(client, ingest_headers, shard("h100", MODELS, expected=1)).json()
    mi300 = post(client, ingest_headers, shard("mi300", MODELS, expected=1, machine="mi300-1"))
    assert mi300.status_code == 201
    assert h100["key"] == "gha-1234-1/h100-8/nightly"
    assert mi300.json()["key"] == "gha-1234-1/mi300-1/nightly"
    assert mi300.json()["id"] != h100["id"]


def test_results_two_shards_both_hold_are_kept_once(
    client: TestClient, ingest_headers: dict[str, str], database: Database
) -> None:
    post(client, ingest_headers, shard("a", ("resnet50", "bert"), expected=2))
    run = post(client, ingest_headers, shard("b", ("bert", "llama"), expected=2)).json()
    assert run["status"] == "completed"
    assert run["result_count"] == 3
    with database.session_scope() as session:
        count = session.scalar(select(func.count()).where(Result.run_id == run["id"]))
    assert count == 3


def test_a_late_shard_completes_the_run_after_the_quiet_time(
    client: TestClient, ingest_headers: dict[str, str], database: Database
) -> None:
    post(client, ingest_headers, SHARDS["shard-1"])
    run = post(client, ingest_headers, SHARDS["shard-2"]).json()
    with database.session_scope() as session:
        assert shards.complete_quiet_runs(session, timedelta(minutes=30)) == []  # not yet
        later = utcnow() + timedelta(minutes=31)
        assert shards.complete_quiet_runs(session, timedelta(minutes=30), later) == [run["id"]]
    stored = client.get(f"/api/v1/runs/{run['id']}").json()
    assert stored["status"] == "completed"
    assert stored["extra"]["shards"] == {"received": 2, "expected": 3, "quiet": True}
    # The third shard, later still, adds its results to the run
    assert post(client, ingest_headers, SHARDS["shard-3"]).status_code == 201
    assert client.get(f"/api/v1/runs/{run['id']}").json()["result_count"] == len(MODELS)


def test_a_run_without_a_shard_count_waits_for_quiet(
    client: TestClient, ingest_headers: dict[str, str], database: Database
) -> None:
    run = post(client, ingest_headers, shard("only", MODELS, expected=None)).json()
    assert run["status"] == "partial"
    with database.session_scope() as session:
        done = shards.complete_quiet_runs(
            session, timedelta(minutes=30), utcnow() + timedelta(hours=1)
        )
    assert done == [run["id"]]


def test_shards_uploaded_at_once_make_one_run(database: Database) -> None:
    from app.runs.ingest import ingest_run
    from app.runs.schemas import RunIn

    names = [f"job-{i}" for i in range(6)]

    def upload(i: int) -> int:
        payload = shard(names[i], (f"model_{i}",), expected=6)
        with database.session_scope() as session:
            return ingest_run(session, RunIn.model_validate(payload), source="t").run.id

    outcomes = in_parallel(upload)
    assert not [o for o in outcomes if isinstance(o, Exception)], outcomes
    assert len(set(outcomes)) == 1
    with database.session_scope() as session:
        run = session.get_one(Run, outcomes[0])
        assert (run.status, run.result_count, run.cases_attempted) == ("completed", 6, 6)


def test_a_shard_reading_the_run_holds_off_the_others_until_it_commits(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Shard B has read its run and is stopped before writing; shard A comes meanwhile. A must
    # wait for B (it takes its turn after B's commit); on SQLite, whose reads run outside the
    # transaction, A used to commit at once and B's counts then overwrote A's: 2 of 3 results.
    from app.runs import ingest
    from app.runs.schemas import RunIn

    def upload(i: int) -> None:
        payload = shard(f"job-{i}", (f"model_{i}",), expected=3)
        with database.session_scope() as session:
            ingest.ingest_run(session, RunIn.model_validate(payload), source="t")

    upload(0)
    b_read, go_on = threading.Event(), threading.Event()
    resolve = ingest.resolve_catalog

    def paused(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread().name == "B":
            b_read.set()
            go_on.wait(10)
        return resolve(*args, **kwargs)

    monkeypatch.setattr(ingest, "resolve_catalog", paused)
    b = threading.Thread(target=upload, args=(2,), name="B")
    b.start()
    assert b_read.wait(10)
    a = threading.Thread(target=upload, args=(1,), name="A")
    a.start()
    a.join(timeout=2)
    assert a.is_alive()  # waiting for B's turn, not past it
    go_on.set()
    b.join(timeout=60)
    a.join(timeout=60)
    with database.session_scope() as session:
        run = session.scalars(select(Run)).one()
        assert (run.status, run.result_count, run.cases_attempted) == ("completed", 3, 3)


def test_a_branch_never_feeds_the_default_branch(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    main_ids = post_history(client, ingest_headers, runs=range(40))  # steady
    assert regressions(client) == []
    branch_ids = []
    for index in range(40, 48):  # bert 20% slower, on a feature branch
        payload = nightly(index, case_rows("bert", "eager", 12.0))
        payload.update(key=f"pr-{index}", branch="feature/faster-attention")
        response = post(client, ingest_headers, payload)
        assert response.status_code == 201, response.text
        assert response.json()["channel"] == branch_channel("nightly", "feature/faster-attention")
        branch_ids.append(response.json()["id"])
    assert regressions(client) == []  # never judged with main's history, nor main with it
    runs = client.get("/api/v1/runs", params={"channel": "nightly", "limit": 200}).json()
    assert {r["id"] for r in runs["items"]} == set(main_ids)
    main = nightly(48, case_rows("bert", "eager", 10.0))
    main.update(key="main-48", branch="main")
    assert post(client, ingest_headers, main).json()["channel"] == "nightly"
