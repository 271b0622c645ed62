"""Posting native runs through the API and waiting for the in-process detection they queue."""

from typing import Any

from fastapi.testclient import TestClient

from app.core.queue import InProcessPublisher


def drain(client: TestClient) -> None:
    """Run what the in-process publisher queued (detection, notices); with Celery, poll."""
    publisher = client.app.state.publisher  # type: ignore[attr-defined]
    if isinstance(publisher, InProcessPublisher):
        publisher.drain()


def post_detected(client: TestClient, headers: dict[str, str], payload: dict[str, Any]) -> int:
    """Store ``payload`` as a new run (201) and detect it in process; the run's id."""
    answer = client.post("/api/v1/runs", json=payload, headers=headers)
    assert answer.status_code == 201, answer.text
    publisher = client.app.state.publisher  # type: ignore[attr-defined]
    assert isinstance(publisher, InProcessPublisher), "a test that reads detection must wait"
    publisher.drain()
    run_id: int = answer.json()["id"]
    return run_id
