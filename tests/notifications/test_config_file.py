"""Subscriptions as code: the YAML file loaded at start-up owns what it names."""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from app.core.config import Settings
from app.core.db import Database
from app.main import create_app
from app.notifications.config_file import FileError, read
from app.notifications.models import Subscription
from tests.conftest import make_token

FILE = """
subscriptions:
  - name: inductor perf
    owner: pt2-team@example.com
    match: {suite: [huggingface, timm_models], config: inductor}
    exclude: [{model: "hf_T5*"}]
    receivers:
      - {kind: webhook, url: "http://127.0.0.1:9/bw", secrets: ["${BW_SECRET}"]}
      - {kind: email, to: [pt2-oncall@example.com]}
    when: {digest_hours: [9, 17]}
  - name: memory
    match: {metric: "*mem*"}
    receivers: [{kind: feed}]
"""
SECRET = "whsec_" + "QUJD" * 8


@contextmanager
def started(settings: Settings, path: Path) -> Iterator[TestClient]:
    configured = settings.model_copy(
        update={"SUBSCRIPTIONS_FILE": path, "RECEIVER_ALLOW": "127.0.0.1"}
    )
    application = create_app(configured)
    with TestClient(application) as client:
        yield client
    application.state.database.dispose()


def listed(client: TestClient, headers: dict[str, str]) -> dict[str, dict[str, Any]]:
    items = client.get("/api/v1/subscriptions", headers=headers).json()["items"]
    return {s["name"]: s for s in items}


def feed_token_of(database: Database, name: str) -> str | None:
    """The stored hash of a subscription's feed token (no read answers the token)."""
    with database.session_scope() as session:
        return session.scalar(select(Subscription.feed_token).where(Subscription.name == name))


def test_the_file_creates_owns_changes_and_deletes(
    settings: Settings, database: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BW_SECRET", SECRET)
    admin = {"Authorization": f"Bearer {make_token(database, 'admin')}"}
    path = tmp_path / "subscriptions.yaml"
    path.write_text(FILE)
    with started(settings, path) as client:
        found = listed(client, admin)
        assert sorted(found) == ["inductor perf", "memory"]
        perf = found["inductor perf"]
        assert (perf["source"], perf["revision"]) == ("file", 1)
        assert perf["receivers"][0]["secrets"] == [f"whsec_…{SECRET[-4:]}"]  # read: masked
        assert perf["when"] == {"digest_hours": [9, 17]}
        assert "token" not in found["memory"]["receivers"][0]  # read: left out
        token = feed_token_of(database, "memory")
        refused = client.patch(
            f"/api/v1/subscriptions/{perf['id']}", json={"paused": True}, headers=admin
        )
        assert refused.status_code == 409
        assert "subscriptions file" in refused.json()["detail"]
        made = client.post(
            "/api/v1/subscriptions",
            json={"name": "adopted", "receivers": [{"kind": "feed"}]},
            headers=admin,
        )
        assert made.status_code == 201

    with started(settings, path) as client:  # unchanged: nothing moves, the feed keeps its URL
        found = listed(client, admin)
        assert found["inductor perf"]["revision"] == 1
        assert feed_token_of(database, "memory") == token

    path.write_text(
        FILE.replace("owner: pt2-team@example.com", "owner: compiler@example.com")
        .replace("  - name: memory", "  - name: adopted")
        .replace('match: {metric: "*mem*"}', "match: {}")
    )
    with started(settings, path) as client:
        found = listed(client, admin)
        assert sorted(found) == ["adopted", "inductor perf"]  # memory left the file
        assert found["inductor perf"]["revision"] == 2
        assert found["inductor perf"]["owner"] == "compiler@example.com"
        assert found["adopted"]["source"] == "file"


def test_a_bad_file_stops_the_start_and_says_where(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BW_SECRET", SECRET)
    path = tmp_path / "subscriptions.yaml"
    path.write_text(FILE.replace("kind: email, to: [pt2-oncall@example.com]", "kind: email"))
    with pytest.raises(FileError, match=r"subscriptions\[0\]\.receivers\[1\]"):
        create_app(settings.model_copy(update={"SUBSCRIPTIONS_FILE": path}))
    monkeypatch.delenv("BW_SECRET")
    path.write_text(FILE)
    with pytest.raises(FileError, match="BW_SECRET is not set"):
        read(path)
    twice = "{name: a, receivers: [{kind: feed}]}"
    path.write_text(f"subscriptions: [{twice}, {twice}]")
    with pytest.raises(FileError, match="given twice: a"):
        read(path)
    path.write_text("- just a list")
    with pytest.raises(FileError, match="'subscriptions' list"):
        read(path)
