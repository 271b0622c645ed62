"""Triggers' bounds hold under concurrency, a trigger no worker adopts expires, and a
project-limited token's triggers stay in its project (issue 26, points 10 and 6)."""

import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update

from app.core.db import Database, utcnow
from app.suite_runs import service, triggers
from app.suite_runs.models import SuiteRun
from app.tokens.service import create_token
from tests.conftest import PEPPER
from tests.suite_runs.test_service import DESCRIPTION, ident, measured
from tests.suite_runs.test_triggers import BODY, api, bearer, published  # noqa: F401

pytestmark = pytest.mark.both_dialects

REQUEST = {
    "machine": "box",
    "tier": "test",
    "trigger": "ci",
    "commit": "abc123",
    "channel": "nightly",
    "models": None,
}


def _parallel_triggers(database: Database, count: int, token_ids: list[int]) -> list[str]:
    """``count`` triggers sent at once, each in its own thread and session; what each got."""
    start = threading.Barrier(count)
    outcomes: list[str] = []

    def trigger(token_id: int) -> None:
        start.wait()
        try:
            with database.session_scope() as session:
                triggers.trigger_suite_run(session, token_id=token_id, key=None, request=REQUEST)
            outcomes.append("queued")
        except triggers.TooManyQueued:
            outcomes.append("refused")

    threads = [threading.Thread(target=trigger, args=(t,)) for t in token_ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return outcomes


@pytest.fixture
def slow_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """Counting takes a while, as on a loaded server: the window a race needs is wide open."""
    check = triggers._check_bounds

    def slow(*args: Any) -> None:
        check(*args)
        time.sleep(0.1)

    monkeypatch.setattr(triggers, "_check_bounds", slow)


@pytest.mark.usefixtures("slow_count")
def test_parallel_triggers_over_the_machine_cap_make_exactly_the_cap(database: Database) -> None:
    cap = triggers.MAX_UNFINISHED_PER_MACHINE
    outcomes = _parallel_triggers(database, 3 * cap, list(range(1, 3 * cap + 1)))
    assert sorted(outcomes) == ["queued"] * cap + ["refused"] * (2 * cap)
    with database.session_scope() as session:
        assert len(session.scalars(select(SuiteRun)).all()) == cap


@pytest.mark.usefixtures("slow_count")
def test_parallel_triggers_of_one_token_over_its_cap_make_exactly_the_cap(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(triggers, "MAX_UNFINISHED_PER_MACHINE", 100)
    monkeypatch.setattr(triggers, "MAX_UNFINISHED_PER_TOKEN", 3)
    outcomes = _parallel_triggers(database, 9, [7] * 9)
    assert sorted(outcomes) == ["queued"] * 3 + ["refused"] * 6


def test_a_trigger_no_worker_adopts_expires_and_stops_counting(
    api: TestClient,  # noqa: F811
    database: Database,
) -> None:
    headers = bearer(database, "trigger")
    for _ in range(triggers.MAX_UNFINISHED_PER_MACHINE):
        assert api.post("/api/v1/suite-runs", json=BODY, headers=headers).status_code == 202
    assert api.post("/api/v1/suite-runs", json=BODY, headers=headers).status_code == 429
    # Seven hours later no worker of gpu-box has taken any (BENCHWATCH_TRIGGER_EXPIRE_S: 6 h).
    with database.session_scope() as session:
        session.execute(update(SuiteRun).values(started_at=utcnow() - timedelta(hours=7)))
    fresh = api.post("/api/v1/suite-runs", json=BODY, headers=headers)
    assert fresh.status_code == 202, fresh.text
    expired = api.get("/api/v1/suite-runs", params={"status": "expired"}).json()
    assert expired["total"] == triggers.MAX_UNFINISHED_PER_MACHINE
    assert "BENCHWATCH_TRIGGER_EXPIRE_S" in expired["items"][0]["reason"]
    assert api.get("/api/v1/suite-runs", params={"status": "queued"}).json()["total"] == 1
    # A worker that starts late finds it expired and runs nothing.
    first = expired["items"][-1]["id"]
    with database.session_scope() as session:
        plans = [service.ShardPlan("matmul inference", [ident("matmul")])]
        late = triggers.adopt_suite_run(session, first, DESCRIPTION, plans)
        assert (late.status, late.shards) == ("expired", [])


def test_the_expiry_is_a_setting(database: Database) -> None:
    with database.session_scope() as session:
        triggers.trigger_suite_run(session, token_id=1, key="a", request=REQUEST)
    with database.session_scope() as session:
        session.execute(update(SuiteRun).values(started_at=utcnow() - timedelta(minutes=10)))
    with database.session_scope() as session:  # an hour: not yet
        triggers.trigger_suite_run(
            session, token_id=1, key="b", request=REQUEST, expire_after=timedelta(hours=1)
        )
        assert session.scalar(select(SuiteRun.status).where(SuiteRun.key == "api-1-a")) == "queued"
    with database.session_scope() as session:  # five minutes: expired
        triggers.trigger_suite_run(
            session, token_id=1, key="c", request=REQUEST, expire_after=timedelta(minutes=5)
        )
        assert session.scalar(select(SuiteRun.status).where(SuiteRun.key == "api-1-a")) == (
            "expired"
        )


def test_a_project_limited_token_triggers_runs_of_its_project_only(
    api: TestClient,  # noqa: F811
    database: Database,
) -> None:
    with database.session_scope() as session:
        _, plain = create_token(session, "vision-ci", ["trigger"], PEPPER, project="vision")
    headers = {"Authorization": f"Bearer {plain}"}
    other = api.post("/api/v1/suite-runs", json={**BODY, "project": "nlp"}, headers=headers)
    assert other.status_code == 403, other.text
    assert other.json()["errors"][0]["loc"] == "body.project"
    assert api.post("/api/v1/suite-runs", json={**BODY, "project": "vision"}, headers=headers)
    answer = api.post("/api/v1/suite-runs", json={**BODY, "key": "k"}, headers=headers)
    assert answer.status_code == 202, answer.text
    suite_run_id = answer.json()["id"]
    # The run the suite makes is stored under the token's project, not `default`.
    plans = [service.ShardPlan("matmul inference", [ident("matmul")])]
    with database.session_scope() as session:
        shard_id = triggers.adopt_suite_run(session, suite_run_id, DESCRIPTION, plans).shards[0].id
    with database.session_scope() as session:
        lease = service.claim_shard(session, shard_id, "w1", 30).lease
        service.finish_shard(session, shard_id, lease, measured("matmul", 1.0), "")
    with database.session_scope() as session:
        run = service.finalize(session, suite_run_id)
        assert run is not None
        assert run.project == "vision"
    # An unlimited token may name a project; without one its runs stay under `default`.
    admin = bearer(database, "trigger", name="release")
    named = api.post("/api/v1/suite-runs", json={**BODY, "project": "nlp"}, headers=admin)
    assert named.status_code == 202, named.text
    with database.session_scope() as session:
        row = session.get(SuiteRun, named.json()["id"])
        assert row is not None
        assert row.description["project"] == "nlp"
