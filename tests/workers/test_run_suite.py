"""`benchwatch run-suite`: runs cases here and stores them through the ingest service."""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from app.core.config import Settings
from app.core.cpu_cores import parse_cores
from app.runs.schemas import RunIn
from workers import cli, run_suite


@pytest.mark.slow
def test_run_suite_stores_a_run_with_skips_and_detection(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/suite.db"
    env = {**os.environ, "BENCHWATCH_DATABASE_URL": url}
    cli = [sys.executable, "-m", "workers.cli"]
    subprocess.run([*cli, "migrate"], env=env, check=True, capture_output=True)
    done = subprocess.run(
        [
            *cli,
            "run-suite",
            "--only",
            "layer_norm",
            "--configs",
            "eager,cudagraphs",
            "--precisions",
            "fp32,int8",
            "--machine",
            "ci-cpu",
            "--key",
            "suite-test",
            "--pin",
            "auto",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "run 1 (suite-test)" in done.stdout
    engine = create_engine(url)
    with engine.connect() as connection:
        run = connection.execute(
            text("SELECT tier, cases_attempted, cases_passed, cases_skipped FROM run")
        ).one()
        assert tuple(run) == ("smoke", 4, 1, 3)  # layer_norm x {eager, cudagraphs} x 2
        reasons = set(
            connection.execute(text("SELECT reason FROM result WHERE status = 'skipped'")).scalars()
        )
        assert any("need a GPU" in r for r in reasons)
        assert connection.execute(text("SELECT count(*) FROM run_anomaly")).scalar() == 1
        torch_version = connection.execute(text("SELECT torch FROM environment")).scalar()
        assert torch_version
        # As a shard's rows do: the latency row its pinning, each row with samples its noise.
        measured = dict(
            connection.execute(
                text(
                    "SELECT metric.name, result.extra FROM result JOIN series ON "
                    "result.series_id = series.id JOIN metric ON series.metric_id = metric.id "
                    "WHERE result.status = 'ok' AND metric.name IN ('latency', 'throughput')"
                )
            ).all()
        )
    engine.dispose()
    latency, throughput = (
        json.loads(measured[m] or "null") or {} for m in ("latency", "throughput")
    )
    pinned = latency["cpu_pinning"]
    assert pinned["how"] == "auto"
    assert len(parse_cores(pinned["cores"])) == pinned["threads"]
    assert latency["noise"] >= 0
    assert "cpu_pinning" not in throughput


def test_a_run_the_server_refuses_is_kept_for_upload(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    code = cli.main(
        [
            "run-suite",
            "--only",
            "layer_norm",
            "--configs",
            "eager",
            "--precisions",
            "fp32",
            "--machine",
            "ci-cpu",
            "--post",
            "http://127.0.0.1:9",  # nothing listens: connection refused
            "--token",
            "t",
        ]
    )
    assert code == 1
    error = capsys.readouterr().err
    (saved,) = tmp_path.glob("benchwatch-run-*.json")
    assert f"benchwatch upload {saved} --format native" in error
    kept = RunIn.model_validate_json(saved.read_text())
    assert kept.machine.name == "ci-cpu"
    assert {r.model for r in kept.results} == {"layer_norm"}
    # Into a database nobody migrated, the answer says what to do.
    settings = Settings(DATABASE_URL=f"sqlite:///{tmp_path}/new.db")
    with pytest.raises(RuntimeError, match="not migrated: run `benchwatch migrate`"):
        run_suite.store(kept, settings)
