"""The audit log: each write that is not an upload, with who, when, before and after."""

from datetime import timedelta
from typing import Any

from fastapi.testclient import TestClient

from app.core.db import Database, utcnow
from app.tokens import service as tokens_service
from tests.anomalies.test_service import dynamic_bert_slower, post_history, regressions
from tests.conftest import PEPPER, make_token


def entries(client: TestClient, headers: dict[str, str], **params: Any) -> list[dict[str, Any]]:
    answer = client.get("/api/v1/audit", params=params, headers=headers)
    assert answer.status_code == 200, answer.text
    items: list[dict[str, Any]] = answer.json()["items"]
    return items


def test_every_kind_of_write_is_logged(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    admin = {"Authorization": f"Bearer {make_token(database, 'admin', name='ops')}"}
    ids = post_history(client, ingest_headers, dynamic_bert_slower)
    assert entries(client, admin, action="run.") == []  # uploads are not logged
    (regression,) = regressions(client)
    patch = {"status": "acknowledged", "note": "bisecting"}
    assert client.patch(f"/api/v1/regressions/{regression['id']}", json=patch, headers=admin)
    group = f"/api/v1/alert-groups/{regression['group_id']}"
    assert client.patch(group, json={"status": "fixed"}, headers=admin).status_code == 200
    body = {
        "name": "bert owners",
        "match": {"model": "bert"},
        "receivers": [{"kind": "webhook", "url": "https://hooks.example/bert"}],
    }
    made = client.post("/api/v1/subscriptions", json=body, headers=admin).json()
    path = f"/api/v1/subscriptions/{made['id']}"
    assert client.patch(path, json={"paused": True}, headers=admin).status_code == 200
    assert client.delete(path, headers=admin).status_code == 204
    silence = {
        "matchers": {"model": "llama"},
        "ends_at": (utcnow() + timedelta(days=3)).isoformat(),
        "comment": "known noisy",
    }
    made_silence = client.post("/api/v1/silences", json=silence, headers=admin).json()
    ended = client.delete(f"/api/v1/silences/{made_silence['id']}", headers=admin)
    assert ended.status_code == 200
    note = {"at": utcnow().isoformat(), "text": "driver upgrade"}
    annotation = client.post("/api/v1/annotations", json=note, headers=admin).json()
    assert client.delete(f"/api/v1/annotations/{annotation['id']}", headers=admin)
    invalid = client.post(
        f"/api/v1/runs/{ids[3]}/invalidate", json={"reason": "bad node"}, headers=admin
    )
    assert invalid.status_code == 200
    assert client.delete(f"/api/v1/runs/{ids[4]}", headers=admin).status_code == 200
    with database.session_scope() as session:
        (token,) = tokens_service.revoke_token(session, "ci")

    log = entries(client, admin, limit=500)
    by_action = {e["action"]: e for e in reversed(log)}  # the newest of each
    assert set(by_action) == {
        "token.create",
        "regression.triage",
        "group.triage",
        "subscription.create",
        "subscription.update",
        "subscription.delete",
        "silence.create",
        "silence.end",
        "annotation.create",
        "annotation.delete",
        "run.invalidate",
        "run.delete",
        "token.revoke",
    }
    triaged = by_action["regression.triage"]
    assert triaged["target"] == f"regression:{regression['id']}"
    assert triaged["before"] == {"status": "new", "note": ""}
    assert triaged["after"] == {"status": "acknowledged", "note": "bisecting"}
    assert triaged["actor"].startswith("ops (token #")
    assert by_action["group.triage"]["after"] == {"status": "fixed"}
    updated = by_action["subscription.update"]
    assert (updated["before"]["paused"], updated["after"]["paused"]) == (False, True)
    created = by_action["subscription.create"]
    assert created["after"]["receivers"] == ["webhook"]  # no address, no secret
    assert "hooks.example" not in str(log)
    assert by_action["silence.end"]["target"] == f"silence:{made_silence['id']}"
    assert by_action["annotation.delete"]["before"]["text"] == "driver upgrade"
    invalidated = by_action["run.invalidate"]
    assert invalidated["target"] == f"run:{ids[3]}"
    assert invalidated["before"]["status"] == "completed"
    assert (invalidated["after"]["status"], invalidated["after"]["invalidated_reason"]) == (
        "invalid",
        "bad node",
    )
    assert by_action["run.delete"]["before"]["key"] == "h100-8-nightly-4"
    assert by_action["token.revoke"]["actor"] == tokens_service.CLI
    assert by_action["token.revoke"]["target"] == f"token:{token.id}"
    assert all(e["at"] for e in log)

    # Filters: by action (a prefix), target, actor; newest first, paged.
    assert [e["action"] for e in entries(client, admin, action="subscription.")] == [
        "subscription.delete",
        "subscription.update",
        "subscription.create",
    ]
    assert len(entries(client, admin, target=f"run:{ids[3]}")) == 1
    assert {e["action"] for e in entries(client, admin, actor="benchwatch command")} == {
        "token.create",
        "token.revoke",
    }
    page = client.get("/api/v1/audit", params={"limit": 2}, headers=admin).json()
    older = client.get(
        "/api/v1/audit", params={"limit": 2, "before": page["next_before"]}, headers=admin
    ).json()
    assert [e["id"] for e in page["items"] + older["items"]] == [e["id"] for e in log[:4]]


def test_the_log_is_for_admins(client: TestClient, database: Database) -> None:
    triage = {"Authorization": f"Bearer {make_token(database, 'triage', name='t')}"}
    assert client.get("/api/v1/audit").status_code == 401
    assert client.get("/api/v1/audit", headers=triage).status_code == 403
    with database.session_scope() as session:
        tokens_service.create_token(session, "x", ["read"], PEPPER, by="someone")
    admin = {"Authorization": f"Bearer {make_token(database, 'admin', name='a')}"}
    assert [e["actor"] for e in entries(client, admin, action="token.create")][1] == "someone"
