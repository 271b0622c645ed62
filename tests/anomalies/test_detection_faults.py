"""Detection is never lost: concurrent detections, lost tasks, a broker that is down, a killed
worker (issue 12, point 7). The fault tests run a Redis server and Celery workers of their own.
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.anomalies import jobs as anomalies_jobs
from app.anomalies.models import Regression
from app.core.config import Settings
from app.core.db import Database
from app.jobs import DETECT_RUN, SWEEP_DETECTION
from app.main import create_app
from app.runs.ingest import ingest_run
from app.runs.models import Run
from app.runs.schemas import RunIn
from tests.anomalies.test_service import BAD, RUNS, dynamic_bert_slower, history_rows
from tests.conftest import PEPPER, make_token, service_missing
from tests.factories import nightly


def store_history(database: Database, runs: range = range(RUNS)) -> list[int]:
    """Runs stored as an upload stores them, but their detection task is never published."""
    noise = np.random.default_rng(0)
    ids = []
    for index in runs:
        bad = index >= BAD
        payload = nightly(
            index,
            history_rows(index, noise, dynamic_bert_slower),
            torch="2.6.0.dev20260113" if bad else "2.6.0.dev20260101",
            triton="3.2.0" if bad else "3.1.0",
        )
        with database.sessionmaker() as session:
            run_in = RunIn.model_validate(payload)
            ids.append(ingest_run(session, run_in, source="test").run.id)
            session.commit()  # a plain commit: the queued detection task is dropped
    return ids


def undetected(database: Database) -> list[int]:
    with database.sessionmaker() as session:
        return list(session.scalars(select(Run.id).where(Run.detected_at.is_(None))))


def regression_count(database: Database) -> int:
    with database.sessionmaker() as session:
        return session.scalar(select(func.count()).select_from(Regression)) or 0


@pytest.mark.both_dialects
def test_concurrent_detections_record_one_regression_and_lose_no_run(database: Database) -> None:
    ids = store_history(database)
    latest = ids[-4:]  # each sees the whole step: each alone would record it
    failures: list[BaseException] = []
    start = threading.Barrier(len(latest))

    def detect(run_id: int) -> None:
        start.wait()
        try:
            anomalies_jobs.detect_run(database, {}, run_id=run_id)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=detect, args=(run_id,)) for run_id in latest]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert failures == []
    assert regression_count(database) == 1
    assert not set(latest) & set(undetected(database))


def test_the_sweep_queues_again_only_overdue_runs(database: Database) -> None:
    ids = store_history(database, range(3))
    assert anomalies_jobs.sweep_detection(database, overdue_s=3600) == 0  # not overdue yet
    published: list[tuple[str, dict[str, object]]] = []

    class Recorder:
        def publish(self, name: str, kwargs: dict[str, object]) -> None:
            published.append((name, kwargs))

    database.set_publisher(Recorder())
    assert anomalies_jobs.sweep_detection(database, overdue_s=0) == 3
    assert published == [(DETECT_RUN, {"run_id": run_id}) for run_id in ids]


def test_a_server_started_after_a_crash_detects_the_runs_it_lost(settings: Settings) -> None:
    """In process, queued detections die with the server; the next one's sweep finds them."""
    database = Database(settings.DATABASE_URL)
    try:
        store_history(database)
        assert len(undetected(database)) == RUNS
        # The sweep a server makes as it starts, at its default interval (tests start none).
        sweep_s = Settings.model_fields["DETECTION_SWEEP_S"].default
        update = {"DETECTION_OVERDUE_S": 0.0, "DETECTION_SWEEP_S": sweep_s}
        application = create_app(settings.model_copy(update=update))
        with TestClient(application) as client:
            deadline = time.monotonic() + 120
            while undetected(database) and time.monotonic() < deadline:
                time.sleep(0.2)
            client.app.state.publisher.drain()  # type: ignore[attr-defined]
        application.state.database.dispose()
        assert undetected(database) == []
        assert regression_count(database) == 1
    finally:
        database.dispose()


# ---- with a real broker and real workers -------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class RedisServer:
    """A redis-server process of this test's own, which the test may stop and start."""

    def __init__(self, workdir: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            service_missing("redis-server", FileNotFoundError("redis-server is not on PATH"))
        self.binary = str(binary)
        self.workdir = workdir
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        command = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1"]
        command += ["--save", "", "--appendonly", "no", "--dir", str(self.workdir)]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        pytest.fail("redis-server did not start")

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)
            self.process = None


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def celery_worker(
    database_url: str, broker_url: str, log: Path
) -> Iterator[subprocess.Popen[bytes]]:
    """``benchwatch worker`` for the service queue, in a process group of its own."""
    env = {
        **os.environ,
        "BENCHWATCH_DATABASE_URL": database_url,
        "BENCHWATCH_BROKER_URL": broker_url,
        "BENCHWATCH_TOKEN_PEPPER": PEPPER,
        "BENCHWATCH_DETECTION_OVERDUE_S": "0",
        "BENCHWATCH_LOG_LEVEL": "INFO",
    }
    with log.open("a") as out:
        worker = subprocess.Popen(
            [sys.executable, "-m", "workers.cli", "worker", "--concurrency", "1"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_for("the worker to be ready", lambda: " ready." in log.read_text(), 60, log)
        yield worker
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGTERM)
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait(timeout=10)


def wait_for(what: str, done: Callable[[], bool], timeout_s: float, log: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}; worker log:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)


@pytest.fixture
def broker_app(postgres_database: Database, broker: RedisServer) -> Iterator[TestClient]:
    settings = Settings(
        DATABASE_URL=postgres_database.url,
        BROKER_URL=broker.url,
        TOKEN_PEPPER=PEPPER,
        DETECTION_OVERDUE_S=0.0,
    )
    application = create_app(settings)
    with TestClient(application) as client:
        yield client
    application.state.database.dispose()


@pytest.mark.slow
def test_uploads_answer_quickly_with_the_broker_down_and_detection_catches_up(
    broker_app: TestClient, postgres_database: Database, broker: RedisServer, tmp_path: Path
) -> None:
    headers = {"Authorization": f"Bearer {make_token(postgres_database, 'ingest')}"}
    noise = np.random.default_rng(0)
    broker.stop()
    slowest = 0.0
    for index in range(RUNS):
        payload = nightly(index, history_rows(index, noise, dynamic_bert_slower))
        began = time.monotonic()
        answer = broker_app.post("/api/v1/runs", json=payload, headers=headers)
        slowest = max(slowest, time.monotonic() - began)
        assert answer.status_code == 201, answer.text
        if index == 0:  # a retry of a stored run is as quick, and stays a 200
            retry = broker_app.post("/api/v1/runs", json=payload, headers=headers)
            assert retry.status_code == 200
    assert slowest < 5.0, f"an upload waited {slowest:.1f} s on the broker that is down"
    assert len(undetected(postgres_database)) == RUNS  # every task was lost

    broker.start()
    log = tmp_path / "worker.log"
    with celery_worker(postgres_database.url, broker.url, log):
        broker_app.app.state.publisher.publish(SWEEP_DETECTION, {})  # type: ignore[attr-defined]
        wait_for("detection to catch up", lambda: not undetected(postgres_database), 180, log)
    assert regression_count(postgres_database) == 1
    assert "anomalies.sweep_detection" in log.read_text()


@pytest.mark.slow
def test_a_task_held_by_a_killed_worker_is_detected_after_all(
    broker_app: TestClient, postgres_database: Database, broker: RedisServer, tmp_path: Path
) -> None:
    """SIGKILL: the task the worker had taken from the broker dies with it; the sweep recovers."""
    store_history(postgres_database, range(RUNS - 1))
    with postgres_database.session_scope() as session:  # all but the newest are done with
        for run in session.scalars(select(Run)):
            run.detected_at = run.created_at
    log = tmp_path / "worker.log"
    headers = {"Authorization": f"Bearer {make_token(postgres_database, 'ingest')}"}
    noise = np.random.default_rng(1)
    payload = nightly(RUNS - 1, history_rows(RUNS - 1, noise, dynamic_bert_slower))
    with celery_worker(postgres_database.url, broker.url, log) as worker:
        os.killpg(worker.pid, signal.SIGSTOP)  # it holds its broker connection, frozen
        answer = broker_app.post("/api/v1/runs", json=payload, headers=headers)
        assert answer.status_code == 201
        time.sleep(1.0)  # the frozen worker's pending fetch takes the task off the queue
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)
    run_id = answer.json()["id"]
    assert run_id in undetected(postgres_database)
    with celery_worker(postgres_database.url, broker.url, log):
        broker_app.app.state.publisher.publish(SWEEP_DETECTION, {})  # type: ignore[attr-defined]
        wait_for("the sweep to recover it", lambda: not undetected(postgres_database), 120, log)
    assert regression_count(postgres_database) == 1


def test_a_retried_upload_asks_again_for_a_detection_still_due(
    client: TestClient, database: Database
) -> None:
    """The first upload's task was lost (say, the broker was down): its retry queues one."""
    (run_id,) = store_history(database, range(1))
    assert undetected(database) == [run_id]
    noise = np.random.default_rng(0)
    payload = nightly(
        0,
        history_rows(0, noise, dynamic_bert_slower),
        torch="2.6.0.dev20260101",
        triton="3.1.0",
    )
    headers = {"Authorization": f"Bearer {make_token(database, 'ingest')}"}
    retry = client.post("/api/v1/runs", json=payload, headers=headers)
    assert retry.status_code == 200, retry.text
    assert retry.json()["id"] == run_id
    client.app.state.publisher.drain()  # type: ignore[attr-defined]
    assert undetected(database) == []
