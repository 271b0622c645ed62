"""Annotations through the API: made with ``triage``, read by anyone, validated, deleted."""

from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.core.db import Database
from app.tokens import service as tokens_service
from tests.conftest import PEPPER, make_token

OUTAGE = {
    "at": "2026-01-10T08:00:00Z",
    "ends_at": "2026-01-10T20:00:00Z",
    "machine": "h100-8",
    "channel": "nightly",
    "text": "rack 4 power outage",
    "url": "https://status.example/incidents/4",
}


@pytest.fixture
def triage(database: Database) -> dict[str, str]:
    return {"Authorization": f"Bearer {make_token(database, 'triage', name='ops')}"}


def post(client: TestClient, headers: dict[str, str], **body: Any) -> Any:
    return client.post("/api/v1/annotations", json=body, headers=headers)


def test_create_list_and_delete(client: TestClient, triage: dict[str, str]) -> None:
    made = post(client, triage, **OUTAGE)
    assert made.status_code == 201, made.text
    stored = made.json()
    assert stored["text"] == "rack 4 power outage"
    assert stored["machine"] == "h100-8"
    assert stored["channel"] == "nightly"
    assert stored["ends_at"].startswith("2026-01-10T20:00:00")
    assert stored["created_by"].startswith("ops (token #")
    driver = post(client, triage, at="2026-01-05T00:00:00Z", text="driver 550 everywhere")
    assert driver.status_code == 201
    other = post(client, triage, at="2026-01-06T00:00:00Z", machine="a100-1", text="node swap")
    assert other.status_code == 201

    listed = client.get("/api/v1/annotations").json()
    assert [a["text"] for a in listed["items"]] == [
        "rack 4 power outage",
        "node swap",
        "driver 550 everywhere",
    ]
    assert listed["total"] == 3
    here = client.get("/api/v1/annotations", params={"machine": "h100-8"}).json()
    assert {a["text"] for a in here["items"]} == {"rack 4 power outage", "driver 550 everywhere"}
    weekly = client.get("/api/v1/annotations", params={"machine": "h100-8", "channel": "weekly"})
    assert [a["text"] for a in weekly.json()["items"]] == ["driver 550 everywhere"]
    # The span overlaps a range that starts inside it.
    window = {"since": "2026-01-10T12:00:00Z", "until": "2026-01-11T00:00:00Z"}
    overlapping = client.get("/api/v1/annotations", params=window).json()
    assert [a["text"] for a in overlapping["items"]] == ["rack 4 power outage"]
    assert client.get("/api/v1/annotations", params={"limit": 1}).json()["limit"] == 1

    gone = client.delete(f"/api/v1/annotations/{stored['id']}", headers=triage)
    assert gone.status_code == 200
    assert gone.json()["id"] == stored["id"]
    assert client.get("/api/v1/annotations").json()["total"] == 2
    again = client.delete(f"/api/v1/annotations/{stored['id']}", headers=triage)
    assert again.status_code == 404
    assert again.json()["error"] == "NotFound"


def test_writes_need_the_triage_scope(
    client: TestClient, ingest_headers: dict[str, str], triage: dict[str, str]
) -> None:
    assert post(client, {}, **OUTAGE).status_code == 401
    assert post(client, ingest_headers, **OUTAGE).status_code == 403
    made = post(client, triage, **OUTAGE).json()
    assert client.delete(f"/api/v1/annotations/{made['id']}").status_code == 401
    refused = client.delete(f"/api/v1/annotations/{made['id']}", headers=ingest_headers)
    assert refused.status_code == 403
    assert client.get("/api/v1/annotations").json()["total"] == 1


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"url": "javascript:alert(1)"}, "url"),
        ({"url": "data:text/html,hi"}, "url"),
        ({"text": "driver\x00upgrade"}, "text"),
        ({"text": "x" * 1_001}, "text"),
        ({"text": ""}, "text"),
        ({"machine": "m\x00"}, "machine"),
        ({"at": "2026-01-10T08:00:00"}, "at"),  # naive: which zone?
        ({"ends_at": "2026-01-10T07:00:00Z"}, "body"),  # before it starts
        ({"machine": None}, "body"),  # a channel without a machine
        ({"colour": "red"}, "colour"),
    ],
)
@pytest.mark.both_dialects
def test_invalid_annotations_are_refused_where_they_are_wrong(
    client: TestClient, triage: dict[str, str], change: dict[str, Any], where: str
) -> None:
    refused = post(client, triage, **(OUTAGE | change))
    assert refused.status_code == 422, refused.text
    body = refused.json()
    assert body["error"] == "ValidationError"
    assert any(where in str(e["loc"]) for e in body["errors"]), body
    assert client.get("/api/v1/annotations").json()["total"] == 0


@pytest.mark.both_dialects
def test_a_query_with_a_nul_or_a_bad_time_is_refused(client: TestClient) -> None:
    assert client.get("/api/v1/annotations", params={"machine": "h\x00"}).status_code == 422
    assert client.get("/api/v1/annotations", params={"since": "yesterday"}).status_code == 422
    assert client.get("/api/v1/annotations", params={"limit": 100_000}).status_code == 422


def test_a_project_token_writes_only_its_projects_annotations(
    client: TestClient, database: Database, triage: dict[str, str]
) -> None:
    with database.session_scope() as session:
        _, plain = tokens_service.create_token(
            session, "vision-ops", ["triage"], PEPPER, project="vision"
        )
    vision = {"Authorization": f"Bearer {plain}"}
    # An unlimited token's annotation of every project, and one of another team's.
    everywhere = post(client, triage, at="2026-01-05T00:00:00Z", text="driver 550").json()
    theirs = post(client, triage, **OUTAGE, project="nlp").json()
    assert theirs["project"] == "nlp"
    assert everywhere["project"] is None

    for refused in (
        post(client, vision, **OUTAGE),  # names no project: every project's
        post(client, vision, **OUTAGE, project="nlp"),
        client.delete(f"/api/v1/annotations/{theirs['id']}", headers=vision),
        client.delete(f"/api/v1/annotations/{everywhere['id']}", headers=vision),
    ):
        assert refused.status_code == 403, refused.text
        (error,) = refused.json()["errors"]
        assert error["field"] == "project"
        assert error["loc"] in {"body.project", "path.annotation_id"}
    assert client.get("/api/v1/annotations").json()["total"] == 2

    ours = post(client, vision, **OUTAGE, project="vision")
    assert ours.status_code == 201, ours.text
    assert ours.json()["project"] == "vision"
    gone = client.delete(f"/api/v1/annotations/{ours.json()['id']}", headers=vision)
    assert gone.status_code == 200
    assert client.delete(f"/api/v1/annotations/{theirs['id']}", headers=triage).status_code == 200
