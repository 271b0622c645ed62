"""Production mode: Redis, a real Celery worker and beat deliver notices to a local receiver.

A receiver that fails three times then succeeds gets one notice (four attempts of the same
webhook-id); a worker SIGKILLed while the receiver holds its request leaves the delivery
leased, and once the lease ends another worker delivers the same notice again: the
receiver sees one webhook-id, and the delivery ends ``delivered``.
"""

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from app.core.config import Settings
from app.core.db import Database
from app.main import create_app
from app.notifications.models import Delivery
from tests.anomalies.test_service import dynamic_bert_slower, post_history
from tests.conftest import PEPPER, make_token
from tests.notifications.receiver import Receiver, receiving

NOTIFY = {
    "BENCHWATCH_RECEIVER_ALLOW": "127.0.0.1",
    "BENCHWATCH_NOTIFY_GROUP_WAIT_S": "0",
    "BENCHWATCH_NOTIFY_SWEEP_S": "0.5",
    "BENCHWATCH_DELIVERY_BACKOFF_S": "0.2",
    "BENCHWATCH_DELIVERY_TIMEOUT_S": "10",
    "BENCHWATCH_DELIVERY_LEASE_S": "4",
    "BENCHWATCH_DETECTION_SWEEP_S": "3600",
}


@contextmanager
def background(
    argv: list[str], env: dict[str, str], log: IO[str]
) -> Iterator[subprocess.Popen[Any]]:
    process = subprocess.Popen(
        [sys.executable, "-m", "workers.cli", *argv],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its pool children die with it
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)


@contextmanager
def service(
    database: Database, redis_url: str, tmp_path: Path
) -> Iterator[tuple[TestClient, dict[str, str], IO[str]]]:
    env = {
        **os.environ,
        **NOTIFY,
        "BENCHWATCH_DATABASE_URL": database.url,
        "BENCHWATCH_BROKER_URL": redis_url,
        "BENCHWATCH_TOKEN_PEPPER": PEPPER,
        "BENCHWATCH_LOG_LEVEL": "INFO",
    }
    settings = Settings(
        DATABASE_URL=database.url,
        BROKER_URL=redis_url,
        TOKEN_PEPPER=PEPPER,
        RECEIVER_ALLOW="127.0.0.1",
    )
    application = create_app(settings)
    log = (tmp_path / "celery.log").open("w")
    beat = ["beat", "--schedule-file", str(tmp_path / "beat-schedule")]
    try:
        with background(beat, env, log), TestClient(application) as client:
            yield client, env, log
    finally:
        log.close()
        application.state.database.dispose()


def subscribe(client: TestClient, database: Database, hook: Receiver) -> None:
    admin = {"Authorization": f"Bearer {make_token(database, 'admin', name='admin')}"}
    body = {
        "name": "bert",
        "match": {"model": "bert"},
        "receivers": [{"kind": "webhook", "url": hook.url}],
    }
    assert client.post("/api/v1/subscriptions", json=body, headers=admin).status_code == 201


def delivery_states(database: Database) -> list[tuple[str, int]]:
    with database.session_scope() as session:
        return [(d.state, d.attempts) for d in session.scalars(select(Delivery))]


def wait_until(check: Any, timeout_s: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"{what}\n{log.read_text()[-4000:]}")


@pytest.mark.slow
def test_retries_on_a_celery_worker_end_in_one_notice(
    postgres_database: Database, redis_url: str, tmp_path: Path
) -> None:
    with (
        receiving(statuses=[500, 502, 503]) as hook,
        service(postgres_database, redis_url, tmp_path) as (client, env, log),
    ):
        subscribe(client, postgres_database, hook)
        with background(["worker"], env, log):
            post_history(
                client,
                {"Authorization": f"Bearer {make_token(postgres_database, 'ingest')}"},
                dynamic_bert_slower,
            )
            wait_until(
                lambda: delivery_states(postgres_database) == [("delivered", 4)],
                90,
                f"not delivered: {delivery_states(postgres_database)}",
                tmp_path / "celery.log",
            )
            time.sleep(2)  # more sweeps: nothing more is sent
        assert len(hook.received) == 4
        assert len(set(hook.ids())) == 1
        assert hook.received[0].json()["event"] == "opened"


@pytest.mark.slow
def test_a_worker_killed_mid_delivery_still_delivers_the_notice_once(
    postgres_database: Database, redis_url: str, tmp_path: Path
) -> None:
    with (
        receiving(hold_s=6) as hook,
        service(postgres_database, redis_url, tmp_path) as (client, env, log),
    ):
        subscribe(client, postgres_database, hook)
        with background(["worker"], env, log) as first:
            post_history(
                client,
                {"Authorization": f"Bearer {make_token(postgres_database, 'ingest')}"},
                dynamic_bert_slower,
            )
            hook.wait_for(1, timeout_s=90)  # the worker is sending: the receiver holds it
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(timeout=10)
        assert delivery_states(postgres_database) == [("sending", 1)]
        hook.hold_s = 0
        with background(["worker"], env, log):
            wait_until(
                lambda: delivery_states(postgres_database) == [("delivered", 2)],
                60,
                f"not delivered: {delivery_states(postgres_database)}",
                tmp_path / "celery.log",
            )
        assert len(hook.received) == 2  # the killed attempt's request, and the retry
        assert len(set(hook.ids())) == 1  # one notice: a receiver deduplicating on it acts once
