"""POST /api/v1/runs: the native payload, idempotency, tokens and all-or-nothing writes."""

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.core.db import Database
from app.runs.ingest import ingest_run
from app.runs.models import Result, Run
from app.runs.schemas import RunIn
from tests.conftest import make_token
from tests.factories import example_run, many_results, result, run_payload


def count(database: Database, model: type[Run] | type[Result]) -> int:
    with database.session_scope() as session:
        return session.scalar(select(func.count()).select_from(model)) or 0


def post(client: TestClient, payload: Any, headers: dict[str, str]) -> Any:
    return client.post("/api/v1/runs", json=payload, headers=headers)


def test_example_payload_is_stored_and_read_back(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    response = post(client, example_run(), ingest_headers)
    assert response.status_code == 201, response.text
    run = response.json()
    assert run["key"] == "gha-123456-1"
    assert run["machine"]["arch_short"] == "mi300x"
    assert run["environment"]["triton"] == "3.1.0"  # filled from the package list
    assert run["coverage"] == {"attempted": 2, "passed": 1, "failed": 1, "skipped": 0}

    detail = client.get(f"/api/v1/runs/{run['id']}").json()
    rows = {(r["model"], r["metric"]): r for r in detail["results"]}
    latency = rows[("resnet50", "latency")]
    assert latency["value"] == 4.21
    assert latency["samples"] == [4.20, 4.21, 4.25]
    assert (latency["unit"], latency["higher_is_better"], latency["config"]) == (
        "ms",
        False,
        "cudagraphs",
    )
    assert rows[("resnet50", "accuracy")]["text_value"] == "pass"
    failed = rows[("hf_T5", "latency")]
    assert (failed["status"], failed["reason"], failed["value"]) == ("failed", "OOM", None)


def test_retry_returns_stored_run_and_changed_payload_conflicts(
    client: TestClient, ingest_headers: dict[str, str], database: Database
) -> None:
    first = post(client, example_run(), ingest_headers)
    retry = post(client, example_run(), ingest_headers)
    assert (first.status_code, retry.status_code) == (201, 200)
    assert retry.json()["id"] == first.json()["id"]

    changed = example_run()
    changed["results"][0]["value"] = 5.0
    conflict = post(client, changed, ingest_headers)
    assert conflict.status_code == 409
    assert "gha-123456-1" in conflict.json()["detail"]
    assert (count(database, Run), count(database, Result)) == (1, 3)


def test_a_retry_is_the_same_body(
    client: TestClient, ingest_headers: dict[str, str], database: Database
) -> None:
    headers = {**ingest_headers, "Content-Type": "application/json"}
    compact = json.dumps(example_run(), separators=(",", ":"))
    first = client.post("/api/v1/runs", content=compact, headers=headers)
    retry = client.post("/api/v1/runs", content=compact, headers=headers)
    assert (first.status_code, retry.status_code) == (201, 200)
    # The same data spelled differently is another body: the key is taken.
    spaced = client.post(
        "/api/v1/runs", content=json.dumps(example_run(), indent=2), headers=headers
    )
    assert spaced.status_code == 409, spaced.text
    assert (count(database, Run), count(database, Result)) == (1, 3)


def test_a_run_stored_from_a_validated_payload_takes_its_retry(
    client: TestClient, ingest_headers: dict[str, str], database: Database
) -> None:
    """Runs stored by uploads, suite runs or earlier versions hold the validated payload's hash."""
    with database.session_scope() as session:
        stored = ingest_run(session, RunIn.model_validate(example_run()), source="upload").run
    retry = post(client, example_run(), ingest_headers)
    assert (retry.status_code, retry.json()["id"]) == (200, stored.id)
    changed = example_run()
    changed["results"][0]["value"] = 5.0
    assert post(client, changed, ingest_headers).status_code == 409


def test_value_defaults_to_median_of_samples(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    payload = run_payload("k", [result(value=None, samples=[3.0, 1.0, 2.0, 10.0])])
    run_id = post(client, payload, ingest_headers).json()["id"]
    (row,) = client.get(f"/api/v1/runs/{run_id}").json()["results"]
    assert row["value"] == 2.5


def test_units_convert_to_the_stored_unit(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    post(client, run_payload("a", [result(value=2.0, unit="ms")]), ingest_headers)
    run_id = post(
        client,
        run_payload("b", [result(value=2500.0, unit="us", samples=[2500.0])], index=1),
        ingest_headers,
    ).json()["id"]
    (row,) = client.get(f"/api/v1/runs/{run_id}").json()["results"]
    assert (row["value"], row["samples"], row["unit"]) == (2.5, [2.5], "ms")


def test_thousands_of_results_in_one_request(
    client: TestClient, ingest_headers: dict[str, str], database: Database
) -> None:
    response = post(client, run_payload("big", many_results(3000)), ingest_headers)
    assert response.status_code == 201, response.text
    assert response.json()["result_count"] == 3000
    assert count(database, Result) == 3000
    # a second run reuses every series
    post(client, run_payload("big2", many_results(3000), index=1), ingest_headers)
    series = client.get("/api/v1/series", params={"limit": 1}).json()
    assert series["total"] == 3000


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 401),
        ({"Authorization": "Bearer bw_not-a-token"}, 401),
        ({"Authorization": "Basic abc"}, 401),
    ],
)
def test_missing_or_invalid_token_is_401(
    client: TestClient, database: Database, headers: dict[str, str], status: int
) -> None:
    response = post(client, example_run(), headers)
    assert response.status_code == status
    assert count(database, Run) == 0


def test_wrong_scope_is_403_and_revoked_token_401(client: TestClient, database: Database) -> None:
    triage = {"Authorization": f"Bearer {make_token(database, 'triage')}"}
    assert post(client, example_run(), triage).status_code == 403
    admin = {"Authorization": f"Bearer {make_token(database, 'admin', name='root')}"}
    assert post(client, example_run(), admin).status_code == 201

    from app.tokens import service as tokens_service

    with database.session_scope() as session:
        tokens_service.revoke_token(session, "root")
    assert post(client, example_run(key="other"), admin).status_code == 401


def test_a_well_known_metric_keeps_its_usual_unit_whatever_the_first_upload_used(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    row = result(value=0.004, samples=[0.004, 0.005], unit="s")
    posted = client.post("/api/v1/runs", json=run_payload("s-first", [row]), headers=ingest_headers)
    assert posted.status_code == 201, posted.text
    (stored,) = client.get(f"/api/v1/runs/{posted.json()['id']}").json()["results"]
    assert stored["unit"] == "ms"
    assert stored["value"] == pytest.approx(4.0)
    assert stored["samples"] == pytest.approx([4.0, 5.0])


def test_numbers_and_text_come_back_exactly(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    numbers = [1e-05, 1e16, 0.1, 123456789.123456789, 2.5e-300, 7.0]
    rows = [
        result(model=f"m{i}", metric="graph_breaks", value=v, samples=numbers)
        for i, v in enumerate(numbers)
    ]
    rows.append(
        result(
            model="text",
            metric="accuracy",
            value=None,
            text_value="fail\tafter a \\ and a\nnewline",
            extra={"log": "tab\there", "n": [1, 2.5]},
        )
    )
    posted = post(client, run_payload("exact", rows), ingest_headers)
    assert posted.status_code == 201, posted.text
    stored = client.get(f"/api/v1/runs/{posted.json()['id']}").json()["results"]
    by_model = {r["model"]: r for r in stored}
    for i, value in enumerate(numbers):
        assert (by_model[f"m{i}"]["value"], by_model[f"m{i}"]["samples"]) == (value, numbers)
    assert by_model["text"]["text_value"] == "fail\tafter a \\ and a\nnewline"
    assert by_model["text"]["extra"] == {"log": "tab\there", "n": [1, 2.5]}
