"""Compare re-runs measured for real (issue 31, point 1): the cases a comparison could not
decide are measured again by the run's machine in a shard process, and the compare folds their
samples in beside the run's; nothing is ingested, no series moves. A worker whose stack changed
does not measure. Asking again while one is unfinished answers it."""

from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.core.db import Database
from app.runs.models import Result, Run
from app.suite_runs.models import COMPARE_TRIGGER, SuiteRun
from tests.anomalies.test_confirmation import case, ingest, latency_rows
from tests.conftest import make_token
from tests.suite_runs.test_rerun_worker import MACHINE, eager_tasks, here, run_shards
from workers.environment import describe_machine

__all__ = ["eager_tasks"]  # the fixture, used by name


def worker_run(database: Database, **stack: str) -> int:
    """Softmax on this host as a worker measured it: three samples, too few to decide."""
    machine = describe_machine(MACHINE).model_dump(mode="json", exclude_none=True)
    with database.session_scope() as session:
        return ingest(
            session,
            0,
            latency_rows(case(), [0.5, 0.51, 0.52]),
            machine=machine,
            environment=here(**stack),
        )


def ask(client: TestClient, database: Database, run_id: int) -> Any:
    token = make_token(database, "trigger", name="on-call")
    body = {"run_id": run_id, "cases": [case()]}
    return client.post(
        "/api/v1/compare-reruns", json=body, headers={"Authorization": f"Bearer {token}"}
    )


def samples_read(client: TestClient, run_id: int) -> list[int]:
    params = {"base_run_id": run_id, "new_run_id": run_id, "metric": "latency", "stats": "true"}
    (row,) = client.get("/api/v1/compare", params=params).raise_for_status().json()["rows"]
    return list(row["confidence"]["samples"])


def test_a_compare_rerun_folds_its_samples_in_and_ingests_nothing(
    eager_tasks: Database, client: TestClient
) -> None:
    run_id = worker_run(eager_tasks)
    assert samples_read(client, run_id) == [3, 3]
    first = ask(client, eager_tasks, run_id)
    assert first.status_code == 202, first.text
    assert ask(client, eager_tasks, run_id).json()["id"] == first.json()["id"]  # unfinished: it
    run_shards(eager_tasks)
    with eager_tasks.session_scope() as session:
        (suite_run,) = session.scalars(select(SuiteRun).where(SuiteRun.trigger == COMPARE_TRIGGER))
        assert suite_run.status == "finished", suite_run.reason
        assert session.scalar(select(func.count()).select_from(Run)) == 1  # nothing ingested
        stored = session.scalars(select(Result.samples).where(Result.run_id == run_id)).all()
        assert [0.5, 0.51, 0.52] in stored  # the run's own samples are left alone
    assert samples_read(client, run_id) == [6, 6]  # the test tier measures 3 samples more


def test_a_worker_whose_stack_changed_does_not_measure_the_cases_again(
    eager_tasks: Database, client: TestClient
) -> None:
    run_id = worker_run(eager_tasks, torch="0.0.1")
    assert ask(client, eager_tasks, run_id).status_code == 202
    run_shards(eager_tasks)
    with eager_tasks.session_scope() as session:
        (suite_run,) = session.scalars(select(SuiteRun).where(SuiteRun.trigger == COMPARE_TRIGGER))
        assert suite_run.status == "failed"
        assert "no longer the run's" in suite_run.reason
        assert "torch 0.0.1 ->" in suite_run.reason
    assert samples_read(client, run_id) == [3, 3]


@pytest.mark.both_dialects  # bounds, bad input or SQL that differs by dialect
@pytest.mark.parametrize(
    ("body", "loc"),
    [
        ({"run_id": 1, "cases": []}, "cases"),
        ({"run_id": 1, "cases": [case()] * 21}, "cases"),
        ({"run_id": 0, "cases": [case()]}, "run_id"),
        ({"run_id": 1, "cases": [{**case(), "model": "x" * 129}]}, "cases[0].model"),
    ],
)
def test_a_bad_request_is_a_422_at_its_field(
    client: TestClient, database: Database, body: dict[str, Any], loc: str
) -> None:
    token = make_token(database, "trigger")
    answer = client.post(
        "/api/v1/compare-reruns", json=body, headers={"Authorization": f"Bearer {token}"}
    )
    assert answer.status_code == 422, answer.text
    assert answer.json()["errors"][0]["loc"] == loc


def test_an_uploaded_run_cannot_be_measured_again(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    with database.session_scope() as session:
        run_id = ingest(session, 0, latency_rows(case(), [1.0, 1.1, 1.2]), source="upload")
    answer = ask(client, database, run_id)
    assert answer.status_code == 422
    assert answer.json()["errors"][0]["loc"] == "body.run_id"
    reader = make_token(database, "read")
    refused = client.post(
        "/api/v1/compare-reruns",
        json={"run_id": run_id, "cases": [case()]},
        headers={"Authorization": f"Bearer {reader}"},
    )
    assert refused.status_code == 403
