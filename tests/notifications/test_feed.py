"""The Atom feed of a subscription, read by a real feed parser."""

from typing import Any

import feedparser
from fastapi.testclient import TestClient

from app.core.config import Settings
from app.core.db import Database
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
