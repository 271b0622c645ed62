"""Production mode: the API publishes to Redis, a real Celery worker runs detection."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.core.config import Settings
from app.core.db import Database
from app.main import create_app
from tests.anomalies.test_service import dynamic_bert_slower, post_history
from tests.conftest import PEPPER, make_token


@pytest.mark.slow
def test_detection_runs_on_a_celery_worker(
    postgres_database: Database, redis_url: str, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        "BENCHWATCH_DATABASE_URL": postgres_database.url,
        "BENCHWATCH_BROKER_URL": redis_url,
        "BENCHWATCH_LOG_LEVEL": "INFO",
    }
    log = (tmp_path / "worker.log").open("w")
    worker = subprocess.Popen(
        [sys.executable, "-m", "workers.cli", "worker"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    settings = Settings(
        DATABASE_URL=postgres_database.url, BROKER_URL=redis_url, TOKEN_PEPPER=PEPPER
    )
    application = create_app(settings)
    headers = {"Authorization": f"Bearer {make_token(postgres_database, 'ingest')}"}
    try:
        with TestClient(application) as client:
            post_history(client, headers, dynamic_bert_slower)
            deadline = time.monotonic() + 120
            found: list[dict[str, object]] = []
            while time.monotonic() < deadline and not found:
                found = client.get("/api/v1/regressions").json()["items"]
                time.sleep(1)
            assert len(found) == 1, (tmp_path / "worker.log").read_text()[-3000:]
            assert worker.poll() is None  # the worker lives on
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        log.close()
        application.state.database.dispose()
    assert "anomalies.detect_run" in (tmp_path / "worker.log").read_text()
