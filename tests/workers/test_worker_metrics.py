"""``benchwatch worker --metrics-port``: a worker on another host serves its own /metrics."""

import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from celery import Celery
from prometheus_client.parser import text_string_to_metric_families

from app.core.db import Database
from app.jobs import DEFAULT_QUEUE, DETECT_RUN
from app.runs.ingest import ingest_run
from app.runs.schemas import RunIn
from tests.anomalies.test_detection_faults import free_port
from tests.factories import example_run
from tests.suite_runs.test_workers import benchwatch, detected, environment, wait_for

LAG = "benchwatch_detection_lag_seconds"


def detections(url: str) -> float | None:
    """The worker's count of first detections (None: it does not answer, or has none yet)."""
    try:
        text = httpx.get(url, timeout=5).text
    except httpx.TransportError:
        return None
    for family in text_string_to_metric_families(text):
        if family.name == LAG:
            counts = [s.value for s in family.samples if s.name == f"{LAG}_count"]
            return sum(counts)
    return None


def store_undetected(database: Database) -> int:
    """A run stored as an upload stores it, its detection task left unpublished."""
    with database.sessionmaker() as session:
        run_in = RunIn.model_validate(example_run(key="metrics-worker"))
        run_id = ingest_run(session, run_in, source="test").run.id
        session.commit()  # a plain commit: the queued detection task is dropped
    return run_id


@pytest.mark.slow  # a real worker starts (imports, a prefork child): about 6 s on 2 cores
def test_a_worker_serves_the_counts_of_its_pool_children(
    postgres_database: Database, redis_url: str, tmp_path: Path
) -> None:
    run_id = store_undetected(postgres_database)
    port = free_port()
    env = environment(postgres_database, redis_url)
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)  # the worker makes its own
    log = tmp_path / "worker.log"
    url = f"http://127.0.0.1:{port}/metrics"
    args = ["worker", "--queues", DEFAULT_QUEUE, "--metrics-port", str(port)]
    with benchwatch(args, env, log):
        wait_for("the worker", lambda: " ready." in log.read_text(), 60, log)
        before = detections(url)
        # The main process has not imported detection: no child wrote a value yet.
        assert before in (None, 0.0), before
        sender = Celery(broker=redis_url)
        sender.send_task(DETECT_RUN, kwargs={"run_id": run_id}, queue=DEFAULT_QUEUE)
        sender.close()
        wait_for("the detection", lambda: detected(postgres_database), 30, log)
        # Counted after the commit, by the pool child that ran the task.
        wait_for("the count", lambda: detections(url) == 1.0, 10, log)
        # The port is taken: a second worker says so and stops.
        again = subprocess.run(
            [sys.executable, "-m", "workers.cli", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert again.returncode == 2, again.stderr
        assert f"cannot serve metrics on 127.0.0.1 port {port}" in again.stderr
    found = re.search(r"PROMETHEUS_MULTIPROC_DIR=(\S+)\)", log.read_text())
    assert found, log.read_text()[-3000:]
    assert not Path(found[1]).exists()  # the private directory went with the worker


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--metrics-port", "0"], "--metrics-port: '0': a port number from 1 to 65535"),
        (["--metrics-port", "65536"], "a port number from 1 to 65535"),
        (["--metrics-port", "http"], "a port number from 1 to 65535"),
        (["--metrics-port", "9100", "--metrics-address", "example.org"], "an IP address"),
        (["--metrics-port", "9100", "--metrics-address", "300.1.1.1"], "an IP address"),
    ],
)
def test_a_bad_metrics_option_exits_2_saying_why(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from workers.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["worker", *argv])
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_an_address_without_a_port_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    from workers.cli import main

    assert main(["worker", "--metrics-address", "0.0.0.0"]) == 2
    assert "--metrics-address needs --metrics-port" in capsys.readouterr().err


def test_a_multiproc_dir_that_is_no_directory_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.core.metrics import MULTIPROC_DIR, share_with_children

    monkeypatch.setenv(MULTIPROC_DIR, str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="is not a directory"):
        share_with_children()
