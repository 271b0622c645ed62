"""Suite runs: shards leased to one worker at a time, recorded once, the run ingested once."""

import threading
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import func, select

from app.core.db import Database, utcnow
from app.kernels.models import KernelCode, KernelProfile
from app.runs.ingest import ingest_run
from app.runs.models import Result, Run
from app.runs.schemas import RunIn
from app.suite_runs import service
from app.suite_runs.models import SuiteRun, SuiteShard
from app.suite_runs.rows import PROFILE
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
        claim = service.claim_shard(session, first, "w1", lease_s=0.5)
        assert claim.outcome == "claimed"
        dead = claim.lease
    now[0] += timedelta(seconds=0.2)
    with database.session_scope() as session:
        busy = service.claim_shard(session, first, "w2", lease_s=0.5)
        assert busy.outcome == "busy"
        assert busy.wait_s == pytest.approx(0.3)
    now[0] += timedelta(seconds=0.4)  # w1 died: it stopped renewing
    with database.session_scope() as session:
        claim = service.claim_shard(session, first, "w1", lease_s=30)  # restarted, same name
        assert claim.outcome == "claimed"
        assert claim.shard.attempts == 2
        assert claim.lease != dead
    with database.session_scope() as session:  # the dead attempt's late writes are refused
        assert not service.renew_lease(session, first, dead, 30)
        assert not service.finish_shard(session, first, dead, measured("matmul", 1.0), "")
        assert not service.release_shard(session, first, dead, "late")
        assert service.renew_lease(session, first, claim.lease, 30)


@pytest.mark.both_dialects
def test_two_workers_claiming_at_once_get_one_claim(database: Database) -> None:
    """One conditional UPDATE: on SQLite too, where SELECT ... FOR UPDATE locks nothing."""
    first, _ = open_run(database)
    outcomes: list[str] = []
    failures: list[BaseException] = []
    start = threading.Barrier(4)

    def claim(worker: str) -> None:
        start.wait()
        try:
            with database.session_scope() as session:
                outcomes.append(service.claim_shard(session, first, worker, 30).outcome)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=claim, args=(f"w{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert failures == []
    assert sorted(outcomes) == ["busy", "busy", "busy", "claimed"]
    with database.session_scope() as session:
        shard = session.get(SuiteShard, first)
        assert shard is not None
        assert (shard.status, shard.attempts) == ("running", 1)


def test_the_run_is_ingested_once_when_the_last_shard_is_in(database: Database) -> None:
    first, second = open_run(database)
    for shard_id, model in ((first, "matmul"), (second, "softmax")):
        with database.session_scope() as session:
            lease = service.claim_shard(session, shard_id, "w1", 30).lease
            assert service.finish_shard(session, shard_id, lease, measured(model, 2.0), "")
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
        lease = service.claim_shard(session, first, "w1", 30).lease
        service.release_shard(session, first, lease, "killed by SIGKILL")
        shard = session.get(SuiteShard, first)
        assert shard is not None
        assert (shard.status, shard.reason) == ("pending", "killed by SIGKILL")
    with database.session_scope() as session:
        lease = service.claim_shard(session, first, "w1", 30).lease
        service.finish_shard(session, first, lease, None, "failed 3 times; last: killed")
        lease = service.claim_shard(session, second, "w1", 30).lease
        bad = [{**measured("softmax", 1.0)[0], "unit": "parsecs"}]
        service.finish_shard(session, second, lease, bad, "")
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


def test_a_run_that_cannot_be_ingested_fails_the_suite_run_with_the_reason(
    database: Database,
) -> None:
    """Its key was taken by another payload: the suite run must not stay running forever."""
    first, second = open_run(database)
    suite_run_id = service_run_id(database)
    with database.session_scope() as session:
        suite_run = session.get(SuiteRun, suite_run_id)
        assert suite_run is not None
        taken = RunIn.model_validate(
            {
                "key": suite_run.key,
                **suite_run.description,
                "results": measured("other", 1.0),
            }
        )
        ingest_run(session, taken, source="someone else")
    for shard_id in (first, second):
        with database.session_scope() as session:
            lease = service.claim_shard(session, shard_id, "w1", 30).lease
            service.finish_shard(session, shard_id, lease, measured("matmul", 2.0), "")
    with database.session_scope() as session:
        assert service.finalize(session, suite_run_id) is None
    with database.session_scope() as session:
        suite_run = session.get(SuiteRun, suite_run_id)
        assert suite_run is not None
        assert suite_run.status == "failed"
        assert "could not be ingested" in suite_run.reason
        assert suite_run.finished_at is not None
        assert session.scalar(select(func.count()).select_from(Run)) == 1  # only the other one
        assert service.finalize(session, suite_run_id) is None  # and it stays failed


def test_a_shards_kernel_profile_is_kept_once_by_the_run(database: Database) -> None:
    """The worker hands a case's profile (and code) over in its kernel_count row: the run keeps
    it in kernel_profile and kernel_code, and the shard's rows let go of it."""
    first, second = open_run(database)
    code = {"graphs": ["# output code"], "kernels": [{"name": "cpp_fused_add_0", "source": "x"}]}
    profile = {"timing": "cpu_self", "calls": 3, "wall_us": 9.0, "kernels": [], "code": code}
    for shard_id, model in ((first, "matmul"), (second, "softmax")):
        rows = measured(model, 2.0)
        rows.append(
            {**ident(model), "metric": "kernel_count", "value": 1.0, "extra": {PROFILE: profile}}
        )
        with database.session_scope() as session:
            lease = service.claim_shard(session, shard_id, "w1", 30).lease
            assert service.finish_shard(session, shard_id, lease, rows, "")
    with database.session_scope() as session:
        run = service.finalize(session, service_run_id(database))
        assert run is not None
        assert session.scalar(select(func.count()).select_from(KernelProfile)) == 2
        assert session.scalar(select(func.count()).select_from(KernelCode)) == 2
        for shard in session.scalars(select(SuiteShard)):
            (count,) = [row for row in shard.rows if row["metric"] == "kernel_count"]
            assert count["extra"] == {}
