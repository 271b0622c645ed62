"""The Atom feed of a subscription, read by a real feed parser."""

import hashlib
from typing import Any

import feedparser
from fastapi.testclient import TestClient
from sqlalchemy import text

from app.core.config import Settings
from app.core.db import Database
from app.notifications.models import Subscription
from tests.notifications.test_delivery import (
    admin,
    app_client,  # noqa: F401 (a fixture)
    detect_bert_regression,
    notify_settings,  # noqa: F401 (a fixture)
    settle,
    subscribe,
)


def test_a_feed_reader_reads_the_notices(
    app_client: TestClient,  # noqa: F811
    database: Database,
    notify_settings: Settings,  # noqa: F811
) -> None:
    created = subscribe(
        app_client,
        database,
        owner="<script>alert(1)</script>",
        receivers=[{"kind": "feed"}],
    )
    token = created["receivers"][0]["token"]
    url = f"/feeds/{token}.atom"
    first = app_client.get(url)
    assert first.status_code == 200, first.text
    empty = feedparser.parse(first.content)
    assert (empty.bozo, empty.entries) == (False, [])
    detect_bert_regression(app_client, database)
    test = app_client.post(f"/api/v1/subscriptions/{created['id']}/test", headers=admin(database))
    assert test.status_code == 202
    settle(app_client)

    answer = app_client.get(url)  # no token header: the URL is the credential
    assert answer.headers["content-type"].startswith("application/atom+xml")
    parsed: Any = feedparser.parse(answer.content)
    assert not parsed.bozo, parsed.bozo_exception
    assert parsed.feed.title == "benchwatch: bert owners"
    assert parsed.feed.author == "<script>alert(1)</script>"  # as text, escaped in the XML
    assert b"<script>" not in answer.content
    titles = [entry.title for entry in parsed.entries]
    assert len(titles) == 2
    assert titles[0].startswith("Test notice")
    assert titles[1].startswith("1 regression on h100-8 (nightly)")
    assert parsed.entries[1].link.startswith("https://bw.example/alerts?group=")
    assert "bert" in parsed.entries[1].summary

    assert app_client.get(f"/feeds/{'x' * 40}.atom").status_code == 404
    assert app_client.get("/feeds/short.atom").status_code == 422


def test_a_feed_token_is_stored_hashed_and_a_switched_off_feed_serves_nothing(
    app_client: TestClient,  # noqa: F811
    database: Database,
    notify_settings: Settings,  # noqa: F811
) -> None:
    created = subscribe(app_client, database, receivers=[{"kind": "feed"}])
    token = created["receivers"][0]["token"]
    with database.session_scope() as session:
        stored = session.get(Subscription, created["id"])
        assert stored is not None
        assert stored.feed_token == hashlib.sha256(token.encode()).hexdigest()
    url, path = f"/feeds/{token}.atom", f"/api/v1/subscriptions/{created['id']}"
    assert app_client.get(url).status_code == 200

    paused = app_client.patch(path, json={"paused": True}, headers=admin(database))
    assert paused.status_code == 200, paused.text
    assert app_client.get(url).status_code == 404
    app_client.patch(path, json={"paused": False}, headers=admin(database))
    assert app_client.get(url).status_code == 200

    off = [{"kind": "feed", "token": token, "disabled": True}]
    disabled = app_client.patch(path, json={"receivers": off}, headers=admin(database))
    assert disabled.status_code == 200, disabled.text
    assert app_client.get(url).status_code == 404


def _raw_row(database: Database, subscription_id: int) -> str:
    """Every column of the subscription's row as stored, as one text."""
    with database.engine.connect() as connection:
        row = connection.execute(
            text("SELECT * FROM subscription WHERE id = :id"), {"id": subscription_id}
        ).one()
    return " ".join(str(value) for value in row)


def test_the_row_keeps_the_feed_tokens_hash_only(
    app_client: TestClient,  # noqa: F811
    database: Database,
    notify_settings: Settings,  # noqa: F811
) -> None:
    """A database read or backup cannot serve the feed: its token is in no column."""
    created = subscribe(app_client, database, receivers=[{"kind": "feed"}])
    token = created["receivers"][0]["token"]
    digest = hashlib.sha256(token.encode()).hexdigest()
    row = _raw_row(database, created["id"])
    assert token not in row
    assert digest in row

    path = f"/api/v1/subscriptions/{created['id']}"
    kept = [{"kind": "feed"}, {"kind": "email", "to": ["oncall@example.com"]}]
    changed = app_client.patch(path, json={"receivers": kept}, headers=admin(database))
    assert changed.status_code == 200, changed.text
    assert "token" not in changed.json()["receivers"][0]  # the same feed: nothing new to show
    row = _raw_row(database, created["id"])
    assert token not in row
    assert digest in row
    assert app_client.get(f"/feeds/{token}.atom").status_code == 200

    renewed = [{"kind": "feed", "token": "n" * 32}]
    answer = app_client.patch(path, json={"receivers": renewed}, headers=admin(database))
    assert answer.status_code == 200, answer.text
    assert answer.json()["receivers"][0]["token"] == "n" * 32
    assert "n" * 32 not in _raw_row(database, created["id"])
    assert app_client.get(f"/feeds/{'n' * 32}.atom").status_code == 200
    assert app_client.get(f"/feeds/{token}.atom").status_code == 404
