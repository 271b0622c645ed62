"""No upload can hold the server: while one is read, a live uvicorn server keeps answering, the
read stops at the parse deadline, and `benchwatch serve` stops waiting for requests on SIGTERM.

One crafted CSV once kept the server's only process busy for minutes: a regular expression
backtracked on a long numeric cell without letting go of the interpreter, so every other
request waited. These tests run a real server (the `live_server` fixture), on SQLite only:
what they measure does not depend on the database.
"""

import argparse
import json
import threading
import time
from typing import Any

import httpx
import pytest
import uvicorn

from app.core.config import Settings, settings
from app.core.db import Database
from tests.conftest import make_token
from workers import cli
from workers.cli import service

PARSE_TIMEOUT_S = 0.5
# /healthz takes milliseconds while another thread parses; a parse on the event loop would
# hold it for the whole parse deadline at least.
HEALTH_WITHIN_S = 0.3
PERF = "inductor_torchbench_amp_training_cuda_performance.csv"
# What is timed is where a parse runs, not a database: SQLite alone.
SQLITE = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


@pytest.fixture
def live_settings(settings: Settings) -> Settings:
    """A short parse deadline, so that a slow file meets it within the test."""
    return settings.model_copy(update={"PARSE_TIMEOUT_S": PARSE_TIMEOUT_S})


def upload_while_polling_health(
    base_url: str, token: str, name: str, content: bytes, fmt: str
) -> tuple[httpx.Response, float, list[float]]:
    """The upload's answer and seconds, and the seconds between /healthz answers meanwhile.

    The server runs in a thread of this process: a parse that held the interpreter would
    stop this loop too, so the time between answers is measured, not each request alone.
    """
    answer: dict[str, Any] = {}

    def send() -> None:
        began = time.perf_counter()
        answer["response"] = httpx.post(
            f"{base_url}/api/v1/uploads",
            files={"file": (name, content)},
            data={"machine": "hostile", "device": "cpu", "format": fmt},
            headers={"Authorization": f"Bearer {token}"},
            timeout=120,
        )
        answer["seconds"] = time.perf_counter() - began

    uploading = threading.Thread(target=send)
    uploading.start()
    health: list[float] = []
    with httpx.Client(base_url=base_url, timeout=120) as client:
        last = time.perf_counter()
        while uploading.is_alive() or not health:
            assert client.get("/healthz").status_code == 200
            now = time.perf_counter()
            health.append(now - last)
            last = now
            time.sleep(0.02)
    uploading.join()
    return answer["response"], answer["seconds"], health


@SQLITE
def test_health_answers_while_a_backtracking_cell_is_sent(
    live_server: str, database: Database
) -> None:
    cell = "1" * 20_000 + "x"  # the old pattern held the interpreter for about 10 s on this
    content = f"dev,name,batch_size,speedup\ncuda,m,8,{cell}\n".encode()
    response, seconds, health = upload_while_polling_health(
        live_server, make_token(database, "ingest"), PERF, content, "torchbench-csv"
    )
    assert max(health) < HEALTH_WITHIN_S, health
    assert response.status_code == 413, response.text
    assert seconds < 1.0


@SQLITE
def test_a_slow_upload_stops_at_the_deadline_and_health_answers_meanwhile(
    live_server: str, database: Database
) -> None:
    # Valid records, many of them: reading them all takes seconds, more than the deadline.
    records = [
        {
            "benchmark": {"name": "micro", "extra_info": {"shape": [i, 3]}},
            "model": {"name": f"m{i}"},
            "metric": {"name": "latency", "benchmark_values": [1.0, 2.0, 3.0]},
        }
        for i in range(60_000)
    ]
    content = json.dumps(records).encode()
    response, seconds, health = upload_while_polling_health(
        live_server, make_token(database, "ingest"), "r.json", content, "pytorch-v3"
    )
    assert response.status_code == 413, response.text
    assert "BENCHWATCH_PARSE_TIMEOUT_S" in response.json()["detail"]
    assert seconds < PARSE_TIMEOUT_S + 2.5  # the JSON itself is parsed before the deadline
    assert max(health) < HEALTH_WITHIN_S, health


def test_serve_stops_waiting_for_requests_after_the_parse_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    called: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: called.update(kwargs))
    args = cli.build_parser("serve").parse_args(["serve", "--no-migrate"])
    assert isinstance(args, argparse.Namespace)
    assert service.cmd_serve(args) == 0
    grace = called["timeout_graceful_shutdown"]
    assert settings.PARSE_TIMEOUT_S < grace <= settings.PARSE_TIMEOUT_S + 30
