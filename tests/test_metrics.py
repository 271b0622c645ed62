"""``/metrics`` in the Prometheus text format, the request id, and JSON log lines."""

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import select

from app.core.config import Settings
from app.core.db import Database, utcnow
from app.core.logging import log_handler
from app.core.metrics import UNMATCHED, after_commit
from app.core.request_id import HEADER, accept_or_make
from app.main import create_app
from app.runs.models import Run
from app.suite_runs import service as suite_runs
from tests.conftest import make_token
from tests.factories import result, run_payload
from tests.notifications.test_delivery import (  # noqa: F401  (fixtures)
    app_client,
    failed_test_delivery,
    notify_settings,
    settle,
)

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(client: TestClient, headers: dict[str, str] | None = None) -> Samples:
    """Every sample of ``/metrics``, read with prometheus-client's own parser."""
    response = client.get("/metrics", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def test_metrics_parse_and_name_what_they_count(client: TestClient) -> None:
    client.get("/healthz")
    samples = scrape(client)
    names = {name for name, _ in samples}
    assert "benchwatch_http_request_duration_seconds_bucket" in names
    for work in ("detection", "delivery", "shard"):
        assert value(samples, "benchwatch_work_waiting", work=work) == 0
    assert value(samples, "benchwatch_http_request_duration_seconds_count",
                 method="GET", route="/healthz", status="2xx") >= 1  # fmt: skip


def test_an_upload_moves_the_ingest_counters_and_detection_lag(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    before = scrape(client)
    body = run_payload("metrics-1", [result("resnet50"), result("bert")])
    assert client.post("/api/v1/runs", json=body, headers=ingest_headers).status_code == 201
    assert client.post("/api/v1/runs", json=body, headers=ingest_headers).status_code == 200
    publisher = client.app.state.publisher  # type: ignore[attr-defined]
    publisher.drain()  # detection, in process
    after = scrape(client)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("benchwatch_uploads_total", outcome="stored") == 1
    assert moved("benchwatch_uploads_total", outcome="retry") == 1
    assert moved("benchwatch_results_ingested_total") == 2
    assert moved("benchwatch_detection_lag_seconds_count") == 1
    route = {"method": "POST", "route": "/api/v1/runs"}
    assert moved("benchwatch_http_request_duration_seconds_count", **route, status="2xx") == 2


def test_a_refused_upload_counts_nothing(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    before = scrape(client)
    stored = run_payload("metrics-2", [result("resnet50")])
    assert client.post("/api/v1/runs", json=stored, headers=ingest_headers).status_code == 201
    other = run_payload("metrics-2", [result("resnet50", value=9.9)])  # same key: 409
    assert client.post("/api/v1/runs", json=other, headers=ingest_headers).status_code == 409
    after = scrape(client)
    moved = value(after, "benchwatch_uploads_total", outcome="retry") - value(
        before, "benchwatch_uploads_total", outcome="retry"
    )
    assert moved == 0


def test_latency_is_labelled_by_route_template_never_by_raw_path(client: TestClient) -> None:
    assert client.get("/api/v1/runs/123456").status_code == 404
    assert client.get("/no/such/page/987654").status_code == 404
    samples = scrape(client)
    labels = {v for _, pairs in samples for _, v in pairs}
    assert not any("123456" in v or "987654" in v for v in labels)
    count = "benchwatch_http_request_duration_seconds_count"
    template = {"method": "GET", "route": "/api/v1/runs/{run_id}", "status": "4xx"}
    assert value(samples, count, **template) >= 1
    assert value(samples, count, method="GET", route=UNMATCHED, status="4xx") >= 1


def test_a_failed_delivery_is_counted(app_client: TestClient, database: Database) -> None:  # noqa: F811
    labels = {"kind": "webhook", "outcome": "retry"}
    before = value(scrape(app_client), "benchwatch_notification_attempts_total", **labels)
    failed_test_delivery(app_client, database, 500, utcnow() + timedelta(hours=1))
    settle(app_client)
    after = value(scrape(app_client), "benchwatch_notification_attempts_total", **labels)
    assert after - before == 1


def test_shard_outcomes_are_counted_once_committed(client: TestClient, database: Database) -> None:
    with database.session_scope() as session:
        plans = [suite_runs.ShardPlan("a", []), suite_runs.ShardPlan("b", [])]
        suite_run = suite_runs.open_suite_run(
            session,
            key="metrics-suite",
            machine="h100-a",
            tier="smoke",
            trigger="schedule",
            description={},
            shards=plans,
        )
        shard_ids = [s.id for s in suite_run.shards]
    before = scrape(client)
    claims = []
    for shard_id in shard_ids:
        with database.session_scope() as session:
            claims.append(suite_runs.claim_shard(session, shard_id, "worker-1", 60.0))
    with database.sessionmaker() as session:  # rolled back: not counted
        suite_runs.finish_shard(session, shard_ids[0], claims[0].lease, [], "")
        session.rollback()
    with database.session_scope() as session:
        suite_runs.finish_shard(session, shard_ids[0], claims[0].lease, [], "")
        suite_runs.finish_shard(session, shard_ids[1], claims[1].lease, None, "crashed")
    after = scrape(client)
    for outcome in ("done", "failed"):
        moved = value(after, "benchwatch_shards_total", outcome=outcome) - value(
            before, "benchwatch_shards_total", outcome=outcome
        )
        assert moved == 1, outcome


def test_after_commit_runs_on_commit_only(database: Database) -> None:
    counted: list[str] = []
    with database.sessionmaker() as session:
        session.execute(select(Run.id).limit(1))
        after_commit(session, lambda: counted.append("rolled back"))
        session.rollback()
        with session.begin():
            session.execute(select(Run.id).limit(1))
            with session.begin_nested():
                after_commit(session, lambda: counted.append("committed"))
            assert counted == []  # a savepoint released: the transaction may still fail
    assert counted == ["committed"]


@pytest.fixture
def private_settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"PUBLIC_READ": False})


def test_a_private_server_needs_a_token_to_read_metrics(
    private_settings: Settings, database: Database
) -> None:
    application = create_app(private_settings)
    with TestClient(application) as client:
        assert client.get("/metrics").status_code == 401
        token = make_token(database, "ingest")
        scrape(client, {"Authorization": f"Bearer {token}"})
    application.state.database.dispose()


def test_metrics_can_be_switched_off(settings: Settings) -> None:
    application = create_app(settings.model_copy(update={"METRICS": False}))
    with TestClient(application) as client:
        assert client.get("/metrics").status_code == 404
    application.state.database.dispose()


def test_a_sane_request_id_is_kept_and_another_replaced(client: TestClient) -> None:
    assert client.get("/healthz", headers={HEADER: "proxy-1234"}).headers[HEADER] == "proxy-1234"
    made = client.get("/healthz", headers={HEADER: "a b\tc"}).headers[HEADER]
    assert made != "a b\tc"
    assert len(made) == 32
    assert accept_or_make("x" * 129) != "x" * 129
    assert client.get("/healthz").headers[HEADER]


@pytest.fixture
def json_lines() -> Iterator[list[str]]:
    """What a JSON log handler (as ``BENCHWATCH_LOG_FORMAT=json`` installs) writes."""
    handler = log_handler("json")
    lines: list[str] = []
    handler.emit = lambda record: lines.append(handler.format(record))  # type: ignore[method-assign]
    logger = logging.getLogger("app.health.router")
    logger.addHandler(handler)
    try:
        yield lines
    finally:
        logger.removeHandler(handler)


def test_a_json_log_line_carries_the_request_id(settings: Settings, json_lines: list[str]) -> None:
    down = settings.model_copy(update={"BROKER_URL": "redis://127.0.0.1:1/0"})
    application = create_app(down)
    with TestClient(application) as client:
        response = client.get("/readyz", headers={HEADER: "trace-42"})
    application.state.database.dispose()
    assert response.status_code == 503
    assert response.headers[HEADER] == "trace-42"
    logged = [json.loads(line) for line in json_lines]
    assert logged, "the readiness check logs why the broker is not ready"
    line = logged[0]
    assert line["request_id"] == "trace-42"
    assert line["logger"] == "app.health.router"
    assert line["level"] == "ERROR"
    assert "broker" in line["message"]
    assert "exception" in line


MULTIPROCESS = """
import os
from prometheus_client.parser import text_string_to_metric_families
from app.core.metrics import render
from app.runs.ingest import UPLOADS
UPLOADS.labels(outcome="stored").inc()
child = os.fork()
if child == 0:
    UPLOADS.labels(outcome="stored").inc(2)
    os._exit(0)
os.waitpid(child, 0)
body, _ = render()
(value,) = [
    s.value for f in text_string_to_metric_families(body.decode()) for s in f.samples
    if s.name == "benchwatch_uploads_total"
]
print(value)
"""


def test_multiprocess_mode_sums_every_process(tmp_path: Path) -> None:
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", MULTIPROCESS], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "3.0"
    assert len(list(tmp_path.glob("counter_*.db"))) == 2
