"""Probes: /healthz always, /readyz checks the database, its migrations and the broker."""

from types import SimpleNamespace
from typing import Any

import pytest
from fastapi.testclient import TestClient
from kombu import Connection

from app.core.config import Settings
from app.health import router as health
from app.main import create_app


def probe(settings: Settings, path: str) -> tuple[int, dict[str, object]]:
    application = create_app(settings)
    with TestClient(application) as client:
        response = client.get(path)
    application.state.database.dispose()
    return response.status_code, response.json()


def test_ready_on_a_migrated_database(settings: Settings) -> None:
    assert probe(settings, "/healthz") == (200, {"status": "ok"})
    assert probe(settings, "/readyz") == (200, {"status": "ok", "checks": {"database": "ok"}})


def test_not_ready_on_an_unmigrated_database(tmp_path: object) -> None:
    status, body = probe(Settings(DATABASE_URL=f"sqlite:///{tmp_path}/empty.db"), "/readyz")
    assert status == 503
    assert "not migrated" in str(body["checks"])


def test_ready_with_a_reachable_broker(settings: Settings, redis_url: str) -> None:
    status, body = probe(settings.model_copy(update={"BROKER_URL": redis_url}), "/readyz")
    assert (status, body["checks"]) == (200, {"database": "ok", "broker": "ok"})


def test_not_ready_when_the_broker_is_down(settings: Settings) -> None:
    down = settings.model_copy(update={"BROKER_URL": "redis://127.0.0.1:1/0"})
    status, body = probe(down, "/readyz")
    assert status == 503
    assert str(body["checks"]["broker"]).startswith("error")  # type: ignore[index]


def test_the_broker_is_asked_once_per_while_however_many_probes(
    settings: Settings, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[str] = []

    class Counted(Connection):  # the real connection to the test Redis, counted
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            opened.append(str(args[0]))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(health, "Connection", Counted)
    # The clock is the test's: on a loaded machine 20 real requests can outlast any short keep.
    now = [1000.0]
    monkeypatch.setattr(health, "time", SimpleNamespace(monotonic=lambda: now[0]))
    application = create_app(settings.model_copy(update={"BROKER_URL": redis_url}))
    with TestClient(application) as client:
        answers = [client.get("/readyz") for _ in range(20)]
        assert {a.json()["checks"]["broker"] for a in answers} == {"ok"}
        assert len(opened) == 1  # before: one broker connection per hit, 20
        now[0] += health.BROKER_CHECK_KEEP_S - 0.1
        assert client.get("/readyz").json()["checks"]["broker"] == "ok"
        assert len(opened) == 1  # still fresh just before the keep ends
        now[0] += 0.2
        assert client.get("/readyz").json()["checks"]["broker"] == "ok"
        assert len(opened) == 2  # asked again once the answer is old
    application.state.database.dispose()
