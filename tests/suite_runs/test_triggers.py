"""Triggers over the API (issue 17, point 4): scope, validation, idempotency, the bound, the
row a worker adopts, the dashboard's suite runs in flight; and a trigger run by a real worker."""

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.db import Database
from app.core.queue import CeleryPublisher
from app.jobs import START_SUITE, TASKS
from app.main import create_app
from app.suite_runs import service, triggers
from app.suite_runs.models import SuiteRun
from app.tokens.models import ApiToken
from app.tokens.service import create_token
from tests.conftest import PEPPER, make_token
from tests.suite_runs.test_service import DESCRIPTION, ident, measured
from tests.suite_runs.test_workers import benchwatch, environment, wait_for

BODY = {"machine": "gpu-box", "tier": "test", "commit": "abc123", "channel": "nightly"}


class Recorder:
    """A publisher that keeps what it was asked to send (or fails while ``down``)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self.down = False

    def publish(self, name: str, kwargs: dict[str, Any]) -> None:
        if self.down:
            raise ConnectionError("the broker is down")
        self.sent.append((name, kwargs))


@pytest.fixture
def published() -> Recorder:
    return Recorder()


@pytest.fixture
def api(database: Database, published: Recorder) -> Iterator[TestClient]:
    """An app with a broker configured, whose tasks go to ``published`` instead."""
    settings = Settings(
        DATABASE_URL=database.url, TOKEN_PEPPER=PEPPER, BROKER_URL="redis://127.0.0.1:1/0"
    )
    application = create_app(settings)
    with TestClient(application) as client:
        application.state.publisher = published
        yield client
    application.state.database.dispose()


def bearer(database: Database, *scopes: str, name: str = "ci") -> dict[str, str]:
    return {"Authorization": f"Bearer {make_token(database, *scopes, name=name)}"}


def test_a_trigger_is_queued_at_once_and_its_worker_told(
    api: TestClient, database: Database, published: Recorder
) -> None:
    headers = bearer(database, "trigger")
    answer = api.post("/api/v1/suite-runs", json={**BODY, "key": "ci-1"}, headers=headers)
    assert answer.status_code == 202, answer.text
    body = answer.json()
    assert (body["status"], body["machine"], body["tier"], body["trigger"]) == (
        "queued",
        "gpu-box",
        "test",
        "ci",
    )
    assert body["commit"] == "abc123"
    assert body["progress"] == {"pending": 0, "running": 0, "done": 0, "failed": 0, "percent": 0}
    assert answer.headers["Location"].endswith(f"/api/v1/suite-runs/{body['id']}")
    shown = api.get(answer.headers["Location"]).json()
    assert (shown["id"], shown["status"], shown["shards"]) == (body["id"], "queued", [])
    assert published.sent == [
        (
            START_SUITE,
            {
                "suite_run_id": body["id"],
                "machine": "gpu-box",
                "tier": "test",
                "channel": "nightly",
                "trigger": "ci",
                "models": None,
            },
        )
    ]
    assert TASKS.queue_for(START_SUITE, **published.sent[0][1]) == "bench.gpu-box"

    retry = api.post("/api/v1/suite-runs", json={**BODY, "key": "ci-1"}, headers=headers)
    assert (retry.status_code, retry.json()["id"]) == (200, body["id"])
    assert len(published.sent) == 1  # nothing queued twice
    other = api.post(
        "/api/v1/suite-runs", json={**BODY, "commit": "def456", "key": "ci-1"}, headers=headers
    )
    assert other.status_code == 409
    assert "ci-1" in other.json()["detail"]
    # Another token's key is its own.
    elsewhere = bearer(database, "trigger", name="release")
    fresh = api.post("/api/v1/suite-runs", json={**BODY, "key": "ci-1"}, headers=elsewhere)
    assert fresh.status_code == 202
    assert fresh.json()["id"] != body["id"]


def test_a_command_suite_of_the_settings_is_triggered_as_its_tier(
    database: Database, published: Recorder
) -> None:
    settings = Settings(
        DATABASE_URL=database.url,
        TOKEN_PEPPER=PEPPER,
        BROKER_URL="redis://127.0.0.1:1/0",
        COMMAND_SUITES={"dynamo": {"command": ["python", "benchmarks/dynamo/runner.py"]}},
    )
    application = create_app(settings)
    body = {k: v for k, v in BODY.items() if k != "tier"}
    with TestClient(application) as client:
        application.state.publisher = published
        headers = bearer(database, "trigger")
        answer = client.post(
            "/api/v1/suite-runs", json={**body, "command": "dynamo"}, headers=headers
        )
        unknown = client.post(
            "/api/v1/suite-runs", json={**body, "command": "hud"}, headers=headers
        )
    application.state.database.dispose()
    assert answer.status_code == 202, answer.text
    assert answer.json()["tier"] == "command:dynamo"
    assert published.sent[0][1]["tier"] == "command:dynamo"
    assert unknown.status_code == 422
    assert "known (BENCHWATCH_COMMAND_SUITES): ['dynamo']" in unknown.json()["detail"]


def test_only_a_trigger_or_admin_token_triggers(api: TestClient, database: Database) -> None:
    assert api.post("/api/v1/suite-runs", json=BODY).status_code == 401
    for scope in ("ingest", "read", "triage"):
        answer = api.post("/api/v1/suite-runs", json=BODY, headers=bearer(database, scope))
        assert answer.status_code == 403, scope
        assert "trigger" in answer.json()["detail"]
    admin = api.post("/api/v1/suite-runs", json=BODY, headers=bearer(database, "admin"))
    assert admin.status_code == 202
    with database.session_scope() as session:
        _token, plain = triggers_token(session, ["h100-*"])
    limited = {"Authorization": f"Bearer {plain}"}
    assert api.post("/api/v1/suite-runs", json=BODY, headers=limited).status_code == 403
    on_h100 = api.post("/api/v1/suite-runs", json={**BODY, "machine": "h100-1"}, headers=limited)
    assert on_h100.status_code == 202


def triggers_token(session: Session, patterns: list[str]) -> tuple[ApiToken, str]:
    return create_token(session, "limited", ["trigger"], PEPPER, machine_patterns=patterns)


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"tier": "huge"}, "tier"),
        ({"machine": "gpu box; rm -rf"}, "machine"),
        ({"machine": ""}, "machine"),
        ({"tier": None}, "body"),
        ({"command": "dynamo"}, "body"),  # both a tier and a command
        ({"tier": None, "command": "dynamo"}, "command"),  # no such command suite here
        ({"commit": ""}, "commit"),
        ({"channel": "a b"}, "channel"),
        ({"trigger": "whenever"}, "trigger"),
        ({"models": []}, "models"),
        ({"key": "x" * 200}, "key"),
        ({"pool": "h100s"}, "pool"),  # pools: not yet
    ],
)
@pytest.mark.both_dialects
def test_an_invalid_trigger_says_where(
    api: TestClient, database: Database, change: dict[str, Any], where: str
) -> None:
    body = {k: v for k, v in {**BODY, **change}.items() if v is not None}
    answer = api.post("/api/v1/suite-runs", json=body, headers=bearer(database, "trigger"))
    assert answer.status_code == 422, answer.text
    locations = [e.get("loc", "") for e in answer.json()["errors"]]
    assert any(where in loc for loc in locations), locations


@pytest.mark.both_dialects
def test_what_one_token_may_queue_is_bounded(
    api: TestClient, database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    headers = bearer(database, "trigger")
    for _ in range(triggers.MAX_UNFINISHED_PER_MACHINE):
        assert api.post("/api/v1/suite-runs", json=BODY, headers=headers).status_code == 202
    over = api.post("/api/v1/suite-runs", json=BODY, headers=headers)
    assert over.status_code == 429
    detail = over.json()["detail"]
    assert "triggered suite runs on 'gpu-box' are still queued or running" in detail
    # One finishing makes room again.
    with database.session_scope() as session:
        suite_run = session.query(SuiteRun).order_by(SuiteRun.id).first()
        assert suite_run is not None
        suite_run.status = "finished"
    assert api.post("/api/v1/suite-runs", json=BODY, headers=headers).status_code == 202
    # Over all machines, a token has a bound of its own.
    monkeypatch.setattr(triggers, "MAX_UNFINISHED_PER_TOKEN", triggers.MAX_UNFINISHED_PER_MACHINE)
    other = api.post("/api/v1/suite-runs", json={**BODY, "machine": "cpu-box"}, headers=headers)
    assert other.status_code == 429
    assert "this token's" in other.json()["detail"]
    mine = bearer(database, "trigger", name="nightly")
    assert (
        api.post(
            "/api/v1/suite-runs", json={**BODY, "machine": "cpu-box"}, headers=mine
        ).status_code
        == 202
    )


def test_without_a_broker_nothing_is_queued(client: TestClient, database: Database) -> None:
    answer = client.post("/api/v1/suite-runs", json=BODY, headers=bearer(database, "trigger"))
    assert answer.status_code == 503
    assert "BENCHWATCH_BROKER_URL" in answer.json()["detail"]
    assert client.get("/api/v1/suite-runs").json()["total"] == 0


def test_a_trigger_the_broker_does_not_take_is_withdrawn(
    api: TestClient, database: Database, published: Recorder
) -> None:
    headers = bearer(database, "trigger")
    published.down = True
    answer = api.post("/api/v1/suite-runs", json={**BODY, "key": "ci-2"}, headers=headers)
    assert answer.status_code == 503
    assert "nothing was queued" in answer.json()["detail"]
    assert api.get("/api/v1/suite-runs").json()["total"] == 0  # nothing left to count
    published.down = False
    again = api.post("/api/v1/suite-runs", json={**BODY, "key": "ci-2"}, headers=headers)
    assert again.status_code == 202
    assert len(published.sent) == 1


def queued(database: Database, **request: Any) -> int:
    asked = {
        "machine": "box",
        "tier": "test",
        "trigger": "ci",
        "commit": "abc123",
        "channel": "nightly",
        "models": None,
    } | request
    with database.session_scope() as session:
        suite_run, _ = triggers.trigger_suite_run(session, token_id=1, key=None, request=asked)
        return suite_run.id


@pytest.mark.both_dialects
def test_the_worker_adopts_the_queued_row_once_and_the_run_keeps_the_commit(
    database: Database,
) -> None:
    suite_run_id = queued(database)
    plans = [service.ShardPlan("matmul inference", [ident("matmul")])]
    with database.session_scope() as session:
        adopted = triggers.adopt_suite_run(session, suite_run_id, DESCRIPTION, plans)
        assert (adopted.status, len(adopted.shards)) == ("running", 1)
        shard_id = adopted.shards[0].id
    with database.session_scope() as session:  # a redelivered start task changes nothing
        again = triggers.adopt_suite_run(session, suite_run_id, DESCRIPTION, plans * 2)
        assert [s.id for s in again.shards] == [shard_id]
    with database.session_scope() as session:
        lease = service.claim_shard(session, shard_id, "w1", 30).lease
        service.finish_shard(session, shard_id, lease, measured("matmul", 1.0), "")
    with database.session_scope() as session:
        run = service.finalize(session, suite_run_id)
        assert run is not None
        assert (run.commit, run.trigger, run.tier) == ("abc123", "ci", "test")
        assert run.extra["request"]["commit"] == "abc123"


def test_a_models_filter_that_names_nothing_fails_the_suite_run(database: Database) -> None:
    suite_run_id = queued(database, models=["nope"])
    with database.session_scope() as session:
        adopted = triggers.adopt_suite_run(session, suite_run_id, DESCRIPTION, [])
        assert adopted.status == "failed"
        assert adopted.reason == "no case of the tier 'test' matches the models ['nope']"


def test_the_dashboard_lists_suite_runs_in_flight_first(
    api: TestClient, database: Database
) -> None:
    done = queued(database, machine="old-box")
    with database.session_scope() as session:
        suite_run = session.get_one(SuiteRun, done)
        suite_run.status = "finished"
    answer = api.post("/api/v1/suite-runs", json=BODY, headers=bearer(database, "trigger"))
    flying = answer.json()["id"]
    running = queued(database, machine="run-box")
    plans = [service.ShardPlan(f"{m} inference", [ident(m)]) for m in ("matmul", "softmax")]
    with database.session_scope() as session:
        shard_id = triggers.adopt_suite_run(session, running, DESCRIPTION, plans).shards[0].id
        lease = service.claim_shard(session, shard_id, "w1", 30).lease
        service.finish_shard(session, shard_id, lease, measured("matmul", 1.0), "")
    page = api.get("/suite-runs").text
    assert page.index("In flight") < page.index(f"Suite run {running} ")
    assert page.index(f"Suite run {running} ") < page.index(f"Suite run {flying} ")
    assert page.index(f"Suite run {flying} ") < page.index("Finished")
    assert page.index("Finished") < page.index(f"Suite run {done} ")
    assert "waiting for the machine" in page
    assert "1 done, 1 pending of 2 shards" in page
    assert 'value="50.0"' in page
    assert 'http-equiv="refresh"' in page
    assert ">Reload</a>" in page
    detail = api.get(f"/api/v1/suite-runs/{running}").json()
    assert detail["progress"] == {"pending": 1, "running": 0, "done": 1, "failed": 0, "percent": 50}


@pytest.mark.slow
def test_a_trigger_over_the_api_runs_on_a_worker_and_shows_progress(
    postgres_database: Database, redis_url: str, tmp_path: Path
) -> None:
    database = postgres_database
    database.set_publisher(CeleryPublisher(redis_url, TASKS.queue_for))
    headers = bearer(database, "trigger")
    settings = Settings(DATABASE_URL=database.url, TOKEN_PEPPER=PEPPER, BROKER_URL=redis_url)
    application = create_app(settings)
    log = tmp_path / "worker.log"
    body = {**BODY, "machine": "api-box", "models": ["softmax", "matmul"], "key": "ci-abc123"}
    with TestClient(application) as client:
        answer = client.post("/api/v1/suite-runs", json=body, headers=headers)
        assert answer.status_code == 202, answer.text
        location = answer.headers["Location"]
        assert client.get(location).json()["status"] == "queued"  # no worker yet
        seen: set[str] = set()

        def over() -> bool:
            shown = client.get(location).json()
            seen.add(shown["status"])
            return shown["status"] in ("finished", "failed")

        with benchwatch(["worker", "--machine", "api-box"], environment(database, redis_url), log):
            wait_for("the triggered suite run", over, 300, log)
        shown = client.get(location).json()
        page = client.get("/suite-runs").text
        run = client.get(f"/api/v1/runs/{shown['run_id']}").json() if shown["run_id"] else {}
    application.state.database.dispose()
    assert shown["status"] == "finished", shown
    assert "running" in seen or "queued" in seen
    assert shown["progress"]["percent"] == 100
    assert shown["progress"]["done"] == shown["shards_total"] >= 2
    assert {s["status"] for s in shown["shards"]} == {"done"}
    assert (run["commit"], run["trigger"], run["tier"]) == ("abc123", "ci", "test")
    assert run["machine"]["name"] == "api-box"
    assert f"run {shown['run_id']}" in page


def test_the_token_cli_offers_the_trigger_scope() -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "workers.cli", "token", "create", "--help"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    assert "trigger" in shown
