"""Asking for a localization (issue 28 point 1) through the API: what is
measurable, one at a time per finding, the machine's daily budget, projects, and reads."""

from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.core.config import Settings
from app.core.db import Database
from app.main import create_app
from app.tokens import service as tokens_service
from tests.conftest import PEPPER, make_token
from tests.factories import result, run_payload
from tests.posting import post_detected

# A 30% step at the 13th nightly, with 1% noise (the detector wants both sides' levels).
WORKER_LEVELS = [
    (10.0 if i < 12 else 13.0) * (1 + 0.01 * x)
    for i, x in enumerate(np.random.default_rng(28).standard_normal(18))
]


def _nightlies(
    client: TestClient,
    headers: dict[str, str],
    *,
    machine: str = "h100-8",
    tier: str | None = "daily",
    model: str = "resnet50",
    project: str | None = None,
) -> None:
    for index, value in enumerate(WORKER_LEVELS):
        torch = "2.6.0.dev20260101" if index < 12 else "2.6.0.dev20260105"
        fields: dict[str, Any] = {"environment": {"channel": "nightly", "torch": torch}}
        if tier is not None:
            fields["tier"] = tier
        if project is not None:
            fields["project"] = project
        samples = [value * (1 + 0.002 * (i % 5)) for i in range(10)]
        row = result(model=model, value=value, samples=samples)
        payload = run_payload(f"{machine}-{model}-{index}", [row], machine=machine, index=index)
        post_detected(client, headers, payload | fields)


def _regression(client: TestClient, model: str = "resnet50") -> dict[str, Any]:
    items = client.get("/api/v1/regressions").raise_for_status().json()["items"]
    found = [r for r in items if r["series"]["benchmark"]["model"] == model]
    assert len(found) == 1, items
    return found[0]


def test_a_worker_measured_regression_is_queued_once_and_read_back(
    client: TestClient, worker_headers: dict[str, str], triage_headers: dict[str, str]
) -> None:
    _nightlies(client, worker_headers)
    step = _regression(client)
    body = {"kind": "regression", "id": step["id"]}
    assert client.post("/api/v1/localizations", json=body).status_code == 401
    asked = client.post("/api/v1/localizations", json=body, headers=triage_headers)
    assert asked.status_code == 201, asked.text
    made = asked.json()
    assert made["state"] == "queued"
    assert made["regression_id"] == step["id"]
    assert made["group_id"] == step["group_id"]
    assert made["machine"] == "h100-8"
    assert made["case"]["model"] == "resnet50"
    assert made["case"]["tier"] == "daily"
    assert made["case"]["metric"] == "latency"
    assert made["case"]["rel_change"] == pytest.approx(0.3, abs=0.01)
    assert made["good_environment"]["torch"] == "2.6.0.dev20260101"
    assert made["bad_environment"]["torch"] == "2.6.0.dev20260105"
    assert made["answer"]["environment_diff"] == {
        "torch": ["2.6.0.dev20260101", "2.6.0.dev20260105"]
    }
    assert made["started_by"].startswith("on-call (token #")
    # Asked again while it is queued: the same one, not a second.
    again = client.post("/api/v1/localizations", json=body, headers=triage_headers)
    assert again.status_code == 200, again.text
    assert again.json()["id"] == made["id"]
    # Read by anyone: the list (by finding, by group, by state) and the one with its probes.
    listed = client.get(
        "/api/v1/localizations", params={"kind": "regression", "finding_id": step["id"]}
    ).json()
    assert [one["id"] for one in listed["items"]] == [made["id"]]
    assert listed["total"] == 1
    by_group = client.get("/api/v1/localizations", params={"group_id": step["group_id"]}).json()
    assert by_group["total"] == 1
    done = client.get("/api/v1/localizations", params={"state": ["culprit_found"]}).json()
    assert done["total"] == 0
    one = client.get(f"/api/v1/localizations/{made['id']}").raise_for_status().json()
    assert one["probes"] == []
    assert client.get("/api/v1/localizations/999999").status_code == 404


def test_a_case_no_worker_measures_is_refused_with_why(
    database: Database,
    settings: Settings,
    ingest_headers: dict[str, str],
    triage_headers: dict[str, str],
) -> None:
    application = create_app(settings)
    with TestClient(application) as client:
        _nightlies(client, ingest_headers)  # uploaded by CI ("ci"), not a worker
        step = _regression(client)
        body = {"kind": "regression", "id": step["id"]}
        refused = client.post("/api/v1/localizations", json=body, headers=triage_headers)
        assert refused.status_code == 409, refused.text
        assert "no benchwatch worker measures torchbench/resnet50 on h100-8" in refused.text
        assert "LOCALIZE_SUITES" in refused.text
    application.state.database.dispose()
    # The operator maps the suite to a command suite: now it is measurable, by that suite.
    mapped = Settings(
        DATABASE_URL=settings.DATABASE_URL,
        TOKEN_PEPPER=PEPPER,
        BROKER_URL=None,
        COMMAND_SUITES={"tb": {"command": ["python", "bench.py"], "format": "pytorch-v3"}},
        LOCALIZE_SUITES={"torchbench": "tb"},
    )
    application = create_app(mapped)
    with TestClient(application) as client:
        asked = client.post("/api/v1/localizations", json=body, headers=triage_headers)
        assert asked.status_code == 201, asked.text
        assert asked.json()["case"]["tier"] == "command:tb"
    application.state.database.dispose()


def test_a_mapping_to_an_unknown_command_suite_is_refused_at_start(database: Database) -> None:
    with pytest.raises(ValueError, match="LOCALIZE_SUITES names command suites not in"):
        Settings(DATABASE_URL=database.url, LOCALIZE_SUITES={"torchbench": "nope"})


def test_a_machine_runs_its_budget_a_day(
    database: Database, settings: Settings, worker_headers: dict[str, str]
) -> None:
    headers = {"Authorization": f"Bearer {make_token(database, 'triage')}"}
    application = create_app(settings.model_copy(update={"LOCALIZE_BUDGET": 2}))
    with TestClient(application) as client:
        for model in ("m1", "m2", "m3"):
            _nightlies(client, worker_headers, model=model)
        ids = [_regression(client, model)["id"] for model in ("m1", "m2", "m3")]
        for finding in ids[:2]:
            asked = client.post(
                "/api/v1/localizations", json={"kind": "regression", "id": finding}, headers=headers
            )
            assert asked.status_code == 201, asked.text
        over = client.post(
            "/api/v1/localizations", json={"kind": "regression", "id": ids[2]}, headers=headers
        )
        assert over.status_code == 409, over.text
        assert "machine h100-8 has run 2 localizations in 24 h (LOCALIZE_BUDGET 2)" in over.text
        assert "the next may start at" in over.text
    application.state.database.dispose()


@pytest.mark.both_dialects
def test_bad_requests_and_other_projects_are_refused(
    client: TestClient,
    database: Database,
    worker_headers: dict[str, str],
    triage_headers: dict[str, str],
) -> None:
    _nightlies(client, worker_headers, project="vision")
    step = _regression(client)
    body = {"kind": "regression", "id": step["id"]}
    with database.session_scope() as session:
        _, nlp = tokens_service.create_token(session, "nlp", ["triage"], PEPPER, project="nlp")
    refused = client.post(
        "/api/v1/localizations", json=body, headers={"Authorization": f"Bearer {nlp}"}
    )
    assert refused.status_code == 403, refused.text
    # A token of the longest name asks: its label (name, id, how) fits where it is kept.
    longest = make_token(database, "triage", name="n" * 128)
    asked = client.post(
        "/api/v1/localizations", json=body, headers={"Authorization": f"Bearer {longest}"}
    )
    assert asked.status_code == 201, asked.text
    assert asked.json()["started_by"].startswith("n" * 128)
    for bad, where in (
        ({"kind": "regression"}, "id"),
        ({"kind": "commit", "id": 1}, "kind"),
        ({"kind": "regression", "id": 0}, "id"),
        ({"kind": "regression", "id": 2**31}, "id"),
        ({"kind": "regression", "id": 1, "more": 1}, "more"),
    ):
        answer = client.post("/api/v1/localizations", json=bad, headers=triage_headers)
        assert answer.status_code == 422, (bad, answer.text)
        assert answer.json()["errors"][0]["loc"] == where, (bad, answer.text)
    for kind in ("regression", "failure", "aggregate"):
        missing = client.post(
            "/api/v1/localizations", json={"kind": kind, "id": 99999}, headers=triage_headers
        )
        assert missing.status_code == 404, missing.text
    for params in ({"state": "nope"}, {"finding_id": 0}, {"kind": "x"}):
        assert client.get("/api/v1/localizations", params=params).status_code == 422
