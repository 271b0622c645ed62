"""Suite runs: shards leased to one worker at a time, recorded once, the run ingested once."""

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import func, select

from app.core.db import Database, utcnow
from app.runs.models import Result, Run
from app.suites import service
from app.suites.models import SuiteShard
from tests.factories import run_payload

DESCRIPTION = {
    key: value for key, value in run_payload("x", []).items() if key in ("machine", "environment")
}


def ident(model: str) -> dict[str, Any]:
    return {
        "suite": "benchwatch-operators",
        "model": model,
        "category": "operator",
        "mode": "inference",
        "precision": "fp32",
        "config": "eager",
        "batch_size": 8,
    }


def measured(model: str, latency: float) -> list[dict[str, Any]]:
    return [
        {**ident(model), "metric": "latency", "value": latency, "samples": [latency]},
        {**ident(model), "metric": "accuracy", "text_value": "pass"},
    ]


def open_run(database: Database, key: str = "suite-a") -> list[int]:
    with database.session_scope() as session:
        suite_run = service.open_suite_run(
            session,
            key=key,
            machine="box",
            tier="test",
            trigger="manual",
            description=DESCRIPTION,
            shards=[
                service.ShardPlan("matmul inference", [ident("matmul")]),
                service.ShardPlan("softmax inference", [ident("softmax")]),
            ],
        )
        return [shard.id for shard in suite_run.shards]


def test_opening_the_same_key_twice_reuses_the_run(database: Database) -> None:
    assert open_run(database) == open_run(database)
    with database.session_scope() as session:
        assert session.scalar(select(func.count()).select_from(SuiteShard)) == 2


def test_a_lease_keeps_other_workers_out_until_it_lapses(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A clock the test moves: a slow commit on a loaded machine must not end the lease early.
    now = [utcnow()]
    monkeypatch.setattr(service, "utcnow", lambda: now[0])
    first, _ = open_run(database)
    with database.session_scope() as session:
        assert service.claim_shard(session, first, "w1", lease_s=0.5).outcome == "claimed"
    now[0] += timedelta(seconds=0.2)
    with database.session_scope() as session:
        busy = service.claim_shard(session, first, "w2", lease_s=0.5)
        assert busy.outcome == "busy"
        assert busy.wait_s == pytest.approx(0.3)
    now[0] += timedelta(seconds=0.4)  # w1 died: it stopped renewing
    with database.session_scope() as session:
        claim = service.claim_shard(session, first, "w2", lease_s=30)
        assert claim.outcome == "claimed"
        assert claim.shard.attempts == 2
    with database.session_scope() as session:  # the dead worker's late writes are refused
        assert not service.renew_lease(session, first, "w1", 30)
        assert not service.finish_shard(session, first, "w1", measured("matmul", 1.0), "")
        assert service.renew_lease(session, first, "w2", 30)


def test_the_run_is_ingested_once_when_the_last_shard_is_in(database: Database) -> None:
    first, second = open_run(database)
    for shard_id, model in ((first, "matmul"), (second, "softmax")):
        with database.session_scope() as session:
            service.claim_shard(session, shard_id, "w1", 30)
            assert service.finish_shard(session, shard_id, "w1", measured(model, 2.0), "")
        with database.session_scope() as session:
            run = service.finalize(session, service_run_id(database))
            assert (run is None) == (shard_id == first)
    with database.session_scope() as session:
        again = service.finalize(session, service_run_id(database))  # a second finaliser
        assert again is not None
        assert session.scalar(select(func.count()).select_from(Run)) == 1
        assert session.scalar(select(func.count()).select_from(Result)) == 4
        assert (again.cases_attempted, again.cases_passed) == (2, 2)
        assert again.tier == "test"
        assert again.trigger == "manual"
    with database.session_scope() as session:  # a finished shard is not claimed again
        assert service.claim_shard(session, first, "w3", 30).outcome == "finished"


def service_run_id(database: Database) -> int:
    with database.session_scope() as session:
        shard = session.scalars(select(SuiteShard)).first()
        assert shard is not None
        return shard.suite_run_id


def test_a_failed_shard_records_its_cases_as_failed_with_the_reason(database: Database) -> None:
    first, second = open_run(database)
    with database.session_scope() as session:
        service.claim_shard(session, first, "w1", 30)
        service.release_shard(session, first, "w1", "killed by SIGKILL")
        shard = session.get(SuiteShard, first)
        assert shard is not None
        assert (shard.status, shard.reason) == ("pending", "killed by SIGKILL")
    with database.session_scope() as session:
        service.claim_shard(session, first, "w1", 30)
        service.finish_shard(session, first, "w1", None, "failed 3 times; last: killed")
        service.claim_shard(session, second, "w1", 30)
        bad = [{**measured("softmax", 1.0)[0], "unit": "parsecs"}]
        service.finish_shard(session, second, "w1", bad, "")
    with database.session_scope() as session:
        run = service.finalize(session, service_run_id(database))
        assert run is not None
        assert (run.cases_attempted, run.cases_failed) == (2, 2)
        reasons = set(session.scalars(select(Result.reason).where(Result.status == "failed")))
        assert "failed 3 times; last: killed" in reasons
        assert any("do not validate" in r and "parsecs" in r for r in reasons)


def test_stale_shards_are_the_unfinished_ones_with_their_wait(database: Database) -> None:
    first, second = open_run(database)
    with database.session_scope() as session:
        service.claim_shard(session, first, "w1", 30)
    with database.session_scope() as session:
        stale = {shard.id: wait for shard, wait in service.stale_shards(session, "box")}
        assert stale[second] == 0
        assert 25 < stale[first] <= 30
        assert service.stale_shards(session, "other-box") == []
