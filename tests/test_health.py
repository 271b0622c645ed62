"""Probes: /healthz always, /readyz checks the database, its migrations and the broker."""

from fastapi.testclient import TestClient

from app.core.config import Settings
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
