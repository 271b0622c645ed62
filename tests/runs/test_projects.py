"""Projects: a run's project keeps its histories apart; a token may be limited to one."""

from typing import Any

from fastapi.testclient import TestClient

from app.core.db import Database
from app.tokens import service as tokens_service
from tests.conftest import PEPPER
from tests.factories import result, run_payload


def project_token(database: Database, project: str | None, *scopes: str) -> dict[str, str]:
    """Authorization headers of a token limited to ``project`` (None: every project)."""
    with database.session_scope() as session:
        _, plain = tokens_service.create_token(
            session, "ci", list(scopes or ("ingest",)), PEPPER, project=project
        )
    return {"Authorization": f"Bearer {plain}"}


def post(client: TestClient, headers: dict[str, str], **fields: Any) -> Any:
    payload = run_payload("gha-1", [result(value=4.2)], **fields)
    return client.post("/api/v1/runs", json=payload, headers=headers)


def test_a_project_limited_token_cannot_post_to_another_project(
    client: TestClient, database: Database
) -> None:
    vision = project_token(database, "vision")
    refused = post(client, vision, project="speech")
    assert refused.status_code == 403, refused.text
    body = refused.json()
    assert "vision" in body["detail"]
    assert "speech" in body["detail"]
    assert body["errors"][0]["loc"] == "body.project"
    assert post(client, vision).status_code == 403  # no project: the default one's
    stored = post(client, vision, project="vision")
    assert stored.status_code == 201, stored.text
    assert stored.json()["project"] == "vision"
    # An upload names its project in a field: refused the same way, with that field.
    upload = client.post(
        "/api/v1/uploads?format=native&project=speech",
        content=b'{"key": "u1", "machine": {"name": "a", "device": "cpu"}, "results": '
        b'[{"suite": "s", "model": "m", "metric": "latency", "value": 1.0}]}',
        headers={**vision, "Content-Type": "application/json"},
    )
    assert upload.status_code == 403, upload.text
    assert upload.json()["errors"][0]["loc"] == "project"
    # A token of every project posts for any.
    assert post(client, project_token(database, None), project="speech").status_code == 201


def test_two_projects_keep_their_own_series_and_keys(
    client: TestClient, database: Database
) -> None:
    headers = project_token(database, None)
    first = post(client, headers, project="vision")
    second = post(client, headers, project="speech")  # the same key, machine, case, channel
    default = post(client, headers)
    assert [r.status_code for r in (first, second, default)] == [201, 201, 201]
    assert first.json()["key"] == "vision:gha-1"
    assert default.json()["key"] == "gha-1"
    assert post(client, headers, project="vision").status_code == 200  # a retry
    series = client.get("/api/v1/series").json()
    assert series["total"] == 3
    assert {s["project"] for s in series["items"]} == {"vision", "speech", "default"}
    vision = client.get("/api/v1/series?project=vision").json()["items"]
    assert len(vision) == 1
    points = client.get(f"/api/v1/series/{vision[0]['id']}/points").json()["points"]
    assert [p["run_id"] for p in points] == [first.json()["id"]]
    runs = client.get("/api/v1/runs?project=speech").json()["items"]
    assert [r["id"] for r in runs] == [second.json()["id"]]
    assert client.get("/api/v1/runs?project=nobody").json()["items"] == []
    assert client.get("/api/v1/runs?project=no%20such").status_code == 422
