"""/api/v1/subscriptions: CRUD, scopes, validation, revisions and unique names."""

from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.core.db import Database
from tests.conftest import make_token
from tests.test_api_edges import assert_error

URL = "/api/v1/subscriptions"


@pytest.fixture
def admin(database: Database) -> dict[str, str]:
    return {"Authorization": f"Bearer {make_token(database, 'admin', name='admin')}"}


def new(name: str = "inductor-perf", **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": name,
        "owner": "pt2-team@example.com",
        "match": {"suite": ["huggingface", "timm_models"], "model": "Bert*"},
        "exclude": [{"config": "eager"}],
        "receivers": [
            {"kind": "webhook", "url": "https://hooks.example/bw"},
            {"kind": "email", "to": ["oncall@example.com"]},
            {"kind": "slack", "url": "https://hooks.slack.com/services/T/B/X"},
        ],
        "when": {"digest_hours": [17, 9, 9]},
    }
    return body | fields


def test_create_read_list_update_delete(client: TestClient, admin: dict[str, str]) -> None:
    created = client.post(URL, json=new(), headers=admin)
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["revision"] == 1
    assert body["paused"] is False
    assert body["match"] == {"suite": ["huggingface", "timm_models"], "model": ["Bert*"]}
    assert body["exclude"] == [{"config": ["eager"]}]
    assert body["when"] == {"digest_hours": [9, 17]}
    assert [r["kind"] for r in body["receivers"]] == ["webhook", "email", "slack"]
    one = f"{URL}/{body['id']}"
    secret = body["receivers"][0]["secrets"][0]
    assert secret.startswith("whsec_")
    assert len(secret) > 30
    read = client.get(one, headers=admin).json()
    assert read["receivers"][0]["secrets"] == [f"whsec_…{secret[-4:]}"]  # then masked
    assert read == {**body, "receivers": read["receivers"]}

    first = new("a-first", match={}, receivers=new()["receivers"][:1])
    del first["when"]
    assert client.post(URL, json=first, headers=admin).status_code == 201
    listed = client.get(URL, params={"limit": 1}, headers=admin).json()
    assert (listed["total"], listed["page"], listed["limit"]) == (2, 1, 1)
    assert [s["name"] for s in listed["items"]] == ["a-first"]  # by name
    assert listed["items"][0]["match"] == {}
    assert listed["items"][0]["when"] == "immediate"

    patched = client.patch(one, json={"paused": True, "owner": "someone"}, headers=admin)
    assert patched.status_code == 200, patched.text
    assert (patched.json()["revision"], patched.json()["paused"]) == (2, True)
    assert patched.json()["match"] == body["match"]  # untouched
    assert patched.json()["updated_at"] >= body["updated_at"]

    replaced = client.put(one, json=new(match={"metric": "latency"}), headers=admin)
    assert replaced.status_code == 200, replaced.text
    assert replaced.json()["revision"] == 3
    assert replaced.json()["match"] == {"metric": ["latency"]}
    assert replaced.json()["paused"] is False  # PUT: a field left out takes its default

    assert client.delete(one, headers=admin).status_code == 204
    assert_error(client.get(one, headers=admin), 404)
    assert_error(client.delete(one, headers=admin), 404)
    assert_error(client.patch(one, json={"paused": True}, headers=admin), 404)
    assert client.get(URL, headers=admin).json()["total"] == 1


def test_the_revision_grows_only_when_something_changes(
    client: TestClient, admin: dict[str, str]
) -> None:
    one = f"{URL}/{client.post(URL, json=new(), headers=admin).json()['id']}"
    same = client.patch(one, json={"owner": new()["owner"], "paused": None}, headers=admin)
    assert same.json()["revision"] == 1
    assert client.put(one, json=new(), headers=admin).json()["revision"] == 1
    revisions = [
        client.patch(one, json=change, headers=admin).json()["revision"]
        for change in (
            {"match": {"model": "T5*"}},
            {"exclude": []},
            {"when": "immediate"},
            {"receivers": [{"kind": "email", "to": ["a@b.example"]}]},
            {"name": "renamed"},
        )
    ]
    assert revisions == [2, 3, 4, 5, 6]
    assert client.get(one, headers=admin).json()["revision"] == 6


def test_names_are_unique(client: TestClient, admin: dict[str, str]) -> None:
    first = client.post(URL, json=new("one"), headers=admin).json()
    client.post(URL, json=new("two"), headers=admin)
    assert_error(client.post(URL, json=new("one"), headers=admin), 409, "name")
    other = f"{URL}/{first['id']}"
    assert_error(client.patch(other, json={"name": "two"}, headers=admin), 409, "name")
    assert_error(client.put(other, json=new("two"), headers=admin), 409, "name")
    assert client.patch(other, json={"name": "one"}, headers=admin).json()["revision"] == 1


def test_every_route_needs_the_admin_scope(client: TestClient, database: Database) -> None:
    ingest = {"Authorization": f"Bearer {make_token(database, 'ingest', 'triage')}"}
    calls = [
        ("GET", URL, None),
        ("POST", URL, new()),
        ("GET", f"{URL}/1", None),
        ("PATCH", f"{URL}/1", {"paused": True}),
        ("PUT", f"{URL}/1", new()),
        ("DELETE", f"{URL}/1", None),
    ]
    for method, path, body in calls:
        assert_error(client.request(method, path, json=body), 401)
        assert_error(client.request(method, path, json=body, headers=ingest), 403)


@pytest.mark.parametrize(
    ("body", "where"),
    [
        (new(match={"modle": "Bert*"}), "match.modle"),
        (new(match={"model": ["Bert*", 3]}), "match.model[1]"),
        (new(match={"model": []}), "match.model"),
        (new(match={"kind": ["failure", "silent"]}), "match.kind[1]"),
        (new(exclude=[{"config": "eager"}, {"colour": "red"}]), "exclude[1].colour"),
        (new(exclude=[{}]), "exclude[0]"),
        (new(match={"min_rel_change": -0.1}), "match.min_rel_change"),
        (new(match={"direction": "worse"}), "match.direction[0]"),
        (
            new(receivers=[{"kind": "webhook", "url": "javascript:alert(1)"}]),
            "receivers[0].webhook.url",
        ),
        (new(receivers=[{"kind": "slack", "url": ""}]), "receivers[0].slack.url"),
        (new(receivers=[{"kind": "email", "to": ["not an address"]}]), "receivers[0].email.to[0]"),
        (new(receivers=[{"kind": "pager", "url": "https://x.example"}]), "receivers[0]"),
        (new(receivers=[]), "receivers"),
        (new(when={"digest_hours": [9, 24]}), "when.digest.digest_hours[1]"),
        (new(name=""), "name"),
        (new(name="x" * 129), "name"),
        (new(name="a\x00b"), "name"),
        (new(colour="red"), "colour"),
    ],
)
@pytest.mark.both_dialects
def test_invalid_bodies_are_422_with_where(
    body: dict[str, Any], where: str, client: TestClient, admin: dict[str, str]
) -> None:
    assert_error(client.post(URL, json=body, headers=admin), 422, where)


def test_a_patch_is_validated_too(client: TestClient, admin: dict[str, str]) -> None:
    one = f"{URL}/{client.post(URL, json=new(), headers=admin).json()['id']}"
    bad = {"receivers": [{"kind": "webhook", "url": "javascript:alert(1)"}]}
    assert_error(client.patch(one, json=bad, headers=admin), 422, "receivers[0].webhook.url")
    assert_error(client.patch(one, json={"when": {"digest_hours": [24]}}, headers=admin), 422)
    assert client.get(one, headers=admin).json()["revision"] == 1


def test_a_feed_token_is_one_subscriptions_only(client: TestClient, admin: dict[str, str]) -> None:
    first = client.post(URL, json=new("a", receivers=[{"kind": "feed"}]), headers=admin)
    token = first.json()["receivers"][0]["token"]
    taken = [{"kind": "feed", "token": token}]
    created = client.post(URL, json=new("b", receivers=taken), headers=admin)
    assert created.status_code == 409, created.text
    assert created.json()["errors"][0]["loc"] == "receivers[0].token"
    other = client.post(URL, json=new("c", receivers=[{"kind": "feed"}]), headers=admin)
    changed = client.patch(f"{URL}/{other.json()['id']}", json={"receivers": taken}, headers=admin)
    assert changed.status_code == 409, changed.text
    same = client.patch(f"{URL}/{first.json()['id']}", json={"receivers": taken}, headers=admin)
    assert same.status_code == 200, same.text  # its own token: kept


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("mmosts://93.184.215.14/tok3n?verify=no", "?verify="),  # TLS certificate checks off
        ("mmosts://93.184.215.14/tok3n?verify=False", "?verify="),
        ("discord://1234/t0ken?verify=off", "?verify="),
        ("mmost://93.184.215.14/tok3n?host=169.254.169.254", "?host="),  # not the host checked
        ("workflows://93.184.215.14/wf/sig?url=http://10.0.0.1/", "?url="),
    ],
)
def test_an_apprise_url_may_not_turn_tls_off_or_name_its_host_in_the_query(
    client: TestClient, admin: dict[str, str], url: str, named: str
) -> None:
    """Issue 26 point 10: these were stored, and delivered as the query said."""
    bad = new(receivers=[{"kind": "apprise", "url": url}])
    body = assert_error(client.post(URL, json=bad, headers=admin), 422, "receivers[0].url")
    assert named in body["errors"][0]["message"]


def test_an_apprise_url_with_verification_on_is_taken(
    client: TestClient, admin: dict[str, str]
) -> None:
    good = new(receivers=[{"kind": "apprise", "url": "mmosts://93.184.215.14/tok3n?verify=yes"}])
    created = client.post(URL, json=good, headers=admin)
    assert created.status_code == 201, created.text
