"""Confirmation re-runs measured for real (issue 15, point 6): the machine's worker runs the
suspected case in a shard process, its samples are pooled into the suspect run and the step
judged; a worker whose stack changed does not measure; a shard that keeps timing out leaves the
step as it was. The history around the real measurement is set far above or below any
plausible softmax latency, so that the verdict does not depend on how loaded this host is."""

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.anomalies import confirmation
from app.anomalies.confirmation import ENVIRONMENT_CHANGED
from app.anomalies.models import Regression
from app.core.config import Settings
from app.core.db import Database
from app.core.queue import CeleryPublisher
from app.jobs import TASKS
from app.main import create_app
from app.runs.models import Result, Run
from app.suite_runs.models import SuiteRun, SuiteShard
from tests.anomalies.test_confirmation import history, reruns, suspect
from tests.conftest import PEPPER
from tests.suite_runs.test_workers import benchwatch, environment, wait_for
from workers.environment import describe_environment, describe_machine
from workers.tasks import suite

MACHINE = "confirm-box"


def here(**changes: str) -> dict[str, Any]:
    """This host's stack, as a worker here describes it (``changes``: a different one)."""
    return describe_environment("nightly").model_dump(mode="json", exclude_none=True) | changes


def suspected(database: Database, levels: Sequence[float], **stack: str) -> tuple[int, int]:
    """Softmax's latency on a worker-made history at ``levels``, a step suspected at the last
    one and its re-run requested: (regression, suspect run)."""
    machine = describe_machine(MACHINE).model_dump(mode="json", exclude_none=True)
    with database.session_scope() as session:
        runs = history(session, levels, machine=machine, environment=here(**stack))
        regression = suspect(session, runs, levels[-1] / levels[0] - 1)
        confirmation.request_reruns(session, [regression])
        return regression.id, runs[-1]


def rerun_of(database: Database, regression_id: int) -> tuple[str, dict[str, Any]]:
    with database.session_scope() as session:
        regression = session.get_one(Regression, regression_id)
        return regression.state, dict(regression.confirmation.get("rerun", {}))


@pytest.fixture
def eager_tasks(database: Database, monkeypatch: pytest.MonkeyPatch) -> Database:
    """Tasks run here with ``apply`` (retries too), on the test database."""
    monkeypatch.setattr(suite, "worker_database", lambda: database)
    return database


def run_shards(database: Database) -> None:
    with database.session_scope() as session:
        shards = list(session.scalars(select(SuiteShard.id).order_by(SuiteShard.id)))
    for shard_id in shards:
        suite.run_shard.apply(kwargs={"shard_id": shard_id})


def test_a_rerun_back_at_the_old_level_withdraws_the_step(eager_tasks: Database) -> None:
    regression_id, suspect_run = suspected(eager_tasks, [1000.0] * 10 + [2000.0])
    run_shards(eager_tasks)
    state, rerun = rerun_of(eager_tasks, regression_id)
    assert state == "withdrawn", rerun
    assert rerun["verdict"].startswith(f"re-run on {MACHINE}: withdrawn; the re-run is back")
    assert (rerun["samples_original"], rerun["samples_added"]) == (3, 3)  # the test tier's plan
    with eager_tasks.session_scope() as session:
        (suite_run,) = reruns(session)
        assert suite_run.status == "finished"
        assert session.scalar(select(func.count()).select_from(Run)) == 11  # nothing ingested
        regression = session.get_one(Regression, regression_id)
        result = session.get_one(Result, (suspect_run, regression.series_id))
        samples = result.samples or []
        assert samples[:3] == pytest.approx([2000.0] * 3, rel=0.02)  # kept
        assert len(samples) == 6
        assert all(0 < sample < 100 for sample in samples[3:])  # softmax, measured here


def test_a_worker_whose_stack_changed_does_not_rerun(eager_tasks: Database) -> None:
    regression_id, _ = suspected(eager_tasks, [1000.0] * 10 + [2000.0], torch="1.0.0")
    run_shards(eager_tasks)
    state, rerun = rerun_of(eager_tasks, regression_id)
    assert state == "suspected"
    assert rerun["verdict"] == ENVIRONMENT_CHANGED
    assert rerun["environment_changes"]["torch"][0] == "1.0.0"
    with eager_tasks.session_scope() as session:
        (suite_run,) = reruns(session)
        assert suite_run.status == "failed"
        (shard,) = suite_run.shards
        assert (shard.status, shard.attempts, shard.rows) == ("failed", 1, None)  # not measured


def test_a_rerun_that_keeps_timing_out_leaves_the_step_suspected(
    eager_tasks: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(suite.settings, "SHARD_TIMEOUT_S", 0.3)  # the child is still starting
    regression_id, _ = suspected(eager_tasks, [1000.0] * 10 + [2000.0])
    run_shards(eager_tasks)
    state, rerun = rerun_of(eager_tasks, regression_id)
    assert state == "suspected"
    assert rerun["status"] == "failed"
    assert rerun["verdict"].startswith("re-run failed: failed 3 times; last: the shard did not")
    with eager_tasks.session_scope() as session:
        (suite_run,) = reruns(session)
        assert suite_run.status == "failed"


@pytest.mark.slow
def test_a_worker_started_later_runs_the_pending_rerun_and_confirms_the_step(
    postgres_database: Database, redis_url: str, tmp_path: Path
) -> None:
    database = postgres_database
    database.set_publisher(CeleryPublisher(redis_url, TASKS.queue_for))
    # The level before is far below any real latency: the re-run confirms the step.
    regression_id, suspect_run = suspected(database, [1e-7] * 10 + [1e-4])
    settings = Settings(DATABASE_URL=database.url, TOKEN_PEPPER=PEPPER)
    application = create_app(settings)
    with TestClient(application) as client:  # no worker yet: the request waits, visibly
        (listed,) = client.get("/api/v1/suite-runs", params={"machine": MACHINE}).json()["items"]
    application.state.database.dispose()
    assert (listed["trigger"], listed["status"], listed["shards_by_status"]) == (
        "confirm",
        "running",
        {"pending": 1},
    )
    assert rerun_of(database, regression_id)[1]["status"] == "requested"

    log = tmp_path / "worker.log"
    env = environment(database, redis_url)
    with benchwatch(["worker", "--machine", MACHINE], env, log):

        def judged() -> bool:
            return rerun_of(database, regression_id)[1]["status"] != "requested"

        wait_for("the re-run's verdict", judged, 300, log)

    state, rerun = rerun_of(database, regression_id)
    assert state == "confirmed", rerun
    assert rerun["p_value"] <= 0.001
    assert rerun["verdict"].startswith(f"re-run on {MACHINE}: confirmed; the step holds")
    with database.session_scope() as session:
        suite_run = session.scalars(select(SuiteRun)).one()
        assert (suite_run.status, suite_run.id) == ("finished", rerun["suite_run_id"])
        (shard,) = suite_run.shards
        assert shard.status == "done"
        regression = session.get_one(Regression, regression_id)
        result = session.get_one(Result, (suspect_run, regression.series_id))
        assert len(result.samples or []) == 6
        assert result.value == pytest.approx(1e-4, rel=0.01)  # the value stays as measured
        assert session.scalar(select(func.count()).select_from(Run)) == 11
