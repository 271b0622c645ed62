"""A project's admin token sees and changes its project's subscriptions only, and no read
answers a receiver's credentials in full (issue 26 point 6), on the API and the
dashboard."""

import re
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.core.db import Database
from app.tokens import service as tokens_service
from tests.conftest import PEPPER, make_token

URL = "/api/v1/subscriptions"
SLACK = "https://hooks.slack.com/services/T0/B0/slack-credential"
APPRISE = "discord://bot-credential/4567"


def project_token(database: Database, project: str) -> str:
    with database.session_scope() as session:
        _, plain = tokens_service.create_token(
            session, f"{project}-admin", ["admin"], PEPPER, project=project
        )
    return plain


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def admin(database: Database) -> dict[str, str]:
    return bearer(make_token(database, "admin", name="admin"))


def body(name: str, **fields: Any) -> dict[str, Any]:
    receivers = [
        {"kind": "webhook", "url": "https://hooks.example/bw?key=webhook-credential"},
        {"kind": "slack", "url": SLACK},
        {"kind": "feed"},
    ]
    return {"name": name, "receivers": receivers, **fields}


def test_a_project_token_sees_and_changes_its_project_only(
    client: TestClient, database: Database, admin: dict[str, str]
) -> None:
    vision = client.post(URL, json=body("vision", match={"project": "vision"}), headers=admin)
    everyone = client.post(URL, json=body("everyone"), headers=admin)
    assert (vision.status_code, everyone.status_code) == (201, 201)
    audio = bearer(project_token(database, "audio"))

    made = client.post(URL, json=body("audio's"), headers=audio)
    assert made.status_code == 201, made.text
    assert made.json()["match"] == {"project": ["audio"]}  # its project added
    refused = client.post(URL, json=body("x", match={"project": "vision"}), headers=audio)
    assert refused.status_code == 403
    assert refused.json()["errors"][0]["loc"] == "body.match.project"

    listed = client.get(URL, headers=audio).json()
    assert (listed["total"], [s["name"] for s in listed["items"]]) == (1, ["audio's"])
    assert client.get(URL, headers=admin).json()["total"] == 3  # an unlimited token: all
    for other in (vision.json()["id"], everyone.json()["id"]):
        one = f"{URL}/{other}"
        assert client.get(one, headers=audio).status_code == 404
        assert client.patch(one, json={"paused": True}, headers=audio).status_code == 404
        assert client.put(one, json=body("taken over"), headers=audio).status_code == 404
        assert client.get(f"{one}/notices", headers=audio).status_code == 404
        assert client.post(f"{one}/test", headers=audio).status_code == 404
        assert client.delete(one, headers=audio).status_code == 404
    assert client.get(URL, headers=admin).json()["total"] == 3  # nothing changed

    own = f"{URL}/{made.json()['id']}"
    widened = client.patch(own, json={"match": {"project": ["audio", "vision"]}}, headers=audio)
    assert widened.status_code == 403
    assert client.patch(own, json={"match": {}}, headers=audio).json()["match"] == {
        "project": ["audio"]
    }

    test = client.post(f"{URL}/{vision.json()['id']}/test", headers=admin)
    delivery = test.json()["deliveries"][0]["id"]
    assert client.get(f"/api/v1/deliveries/{delivery}", headers=audio).status_code == 404
    redeliver = f"/api/v1/deliveries/{delivery}/redeliver"
    assert client.post(redeliver, headers=audio).status_code == 404
    assert client.get(f"/api/v1/deliveries/{delivery}", headers=admin).status_code == 200


def test_no_read_answers_a_credential_in_full(
    client: TestClient, database: Database, admin: dict[str, str]
) -> None:
    receivers = [*body("x")["receivers"], {"kind": "apprise", "url": APPRISE}]
    made = client.post(URL, json={"name": "secret", "receivers": receivers}, headers=admin)
    assert made.status_code == 201, made.text
    answered = made.json()["receivers"]
    secret, token = answered[0]["secrets"][0], answered[2]["token"]
    assert len(secret) > 30  # made here: this answer shows them
    assert len(token) >= 32
    one = f"{URL}/{made.json()['id']}"
    for read in (client.get(one, headers=admin).text, client.get(URL, headers=admin).text):
        for credential in (
            secret,
            token,
            "webhook-credential",
            "slack-credential",
            "bot-credential",
        ):
            assert credential not in read
    shown = client.get(one, headers=admin).json()["receivers"]
    assert [r.get("url") for r in shown] == [
        "https://hooks.example/…",
        "https://hooks.slack.com/…",
        None,
        "discord://…",
    ]
    # A read sent back keeps what it stands for: a masked URL its URL, a secret left out its
    # secrets (before, a masked URL would have been stored as the URL).
    back = [{k: v for k, v in r.items() if k != "secrets"} for r in shown]
    kept = client.put(one, json={"name": "secret", "receivers": back}, headers=admin)
    assert kept.status_code == 200, kept.text
    assert kept.json()["receivers"] == shown  # nothing new made: nothing shown in full
    assert client.get(f"/feeds/{token}.atom").status_code == 200  # the feed kept its token
    ambiguous = [{"kind": "slack", "url": "https://hooks.slack.com/…"}] * 2
    refused = client.patch(one, json={"receivers": [ambiguous[0]]}, headers=admin)
    assert refused.status_code == 200  # one read back: it is that one
    refused = client.patch(
        one,
        json={"receivers": [{"kind": "webhook", "url": "https://elsewhere.example/…"}]},
        headers=admin,
    )
    assert refused.status_code == 422
    assert refused.json()["errors"][0]["loc"] == "receivers[0].url"

    # The dashboard, signed in with the same admin token: masked too.
    plain = make_token(database, "admin", name="page")
    signed = client.post("/login", data={"token": plain}, follow_redirects=False)
    assert signed.status_code == 303, signed.text[-3000:]
    page = client.get(one.removeprefix("/api/v1")).text
    assert "Subscriptions" in page or "subscription" in page
    for credential in (secret, token, "slack-credential", "bot-credential"):
        assert credential not in page


def test_the_dashboard_lists_a_project_token_its_project_only(
    client: TestClient, database: Database, admin: dict[str, str]
) -> None:
    vision = client.post(URL, json=body("vision-only", match={"project": "vision"}), headers=admin)
    client.post(URL, json=body("audio-only", match={"project": "audio"}), headers=admin)
    audio = project_token(database, "audio")
    signed = client.post("/login", data={"token": audio}, follow_redirects=False)
    assert signed.status_code == 303
    listed = client.get("/subscriptions").text
    assert "audio-only" in listed
    assert "vision-only" not in listed
    assert client.get(f"/subscriptions/{vision.json()['id']}").status_code == 404
    csrf = re.search(r'<meta name="csrf-token" content="([^"]+)">', listed)
    assert csrf is not None
    form = {"csrf": csrf.group(1), "paused": "true"}
    assert client.post(f"/subscriptions/{vision.json()['id']}/pause", data=form).status_code == 404
    assert client.get(f"{URL}/{vision.json()['id']}", headers=admin).json()["paused"] is False
