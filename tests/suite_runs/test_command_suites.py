"""Command suites (issue 17, point 3): an operator's command run by a worker as a shard, the
files it writes read back through the upload parsers; its failures (non-zero exit, a hang,
nothing written, a file that does not parse) recorded with their reasons; a bad definition
refused at start; and a real worker, started by beat, running one that writes a dynamo CSV."""

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError
from sqlalchemy import select

from app.core.command_suites import CommandSuite, command_name, command_tier
from app.core.config import Schedule, Settings
from app.core.db import Database
from app.main import create_app
from app.runs.models import Run
from app.runtime import check_settings
from app.suite_runs.models import SuiteRun
from app.uploads.formats import BY_NAME
from tests.conftest import PEPPER
from tests.suite_runs.test_triggers import queued
from tests.suite_runs.test_workers import benchwatch, environment, finished, wait_for
from workers.celery_app import beat_schedule
from workers.tasks import suite

DYNAMO_CSV = (
    Path(__file__).parents[1]
    / "data/uploads/torchbench/cpu_cppwrapper_BERT_pytorch_performance_fullcols.csv"
)
# What PyTorch's benchmarks/dynamo runner would name it with --output.
WRITTEN = "inductor_torchbench_amp_inference_cpu_performance.csv"
MACHINE = "cmd-box"
# The command: copies a dynamo CSV into $BENCHWATCH_OUTPUT_DIR; checks what it was given.
SCRIPT = """
import os, shutil, sys
assert os.environ["TEAM_FLAG"] == "on", "the suite's env is added"
assert "BENCHWATCH_DATABASE_URL" not in os.environ, "the worker's settings are not passed"
assert (os.environ["BENCHWATCH_SHARD_INDEX"], os.environ["BENCHWATCH_SHARD_COUNT"]) == ("0", "1")
assert os.getcwd() == os.path.realpath(sys.argv[2]), "cwd"
print("running BERT_pytorch")
shutil.copy(sys.argv[1], os.path.join(os.environ["BENCHWATCH_OUTPUT_DIR"], sys.argv[3]))
"""


def dynamo_suite(tmp_path: Path, **changes: Any) -> dict[str, Any]:
    script = tmp_path / "bench.py"
    script.write_text(SCRIPT)
    return {
        "command": [sys.executable, str(script), str(DYNAMO_CSV), str(tmp_path), WRITTEN],
        "cwd": str(tmp_path),
        "env": {"TEAM_FLAG": "on"},
        "outputs": ["*.csv"],
        "format": "torchbench-csv",
        **changes,
    }


def python(code: str, **changes: Any) -> dict[str, Any]:
    return {"command": [sys.executable, "-c", code], **changes}


@pytest.fixture
def eager_tasks(database: Database, monkeypatch: pytest.MonkeyPatch) -> Database:
    """Tasks run here with ``apply`` (retries too), on the test database; shards are not
    queued but run by ``run_suite``."""
    monkeypatch.setattr(suite, "worker_database", lambda: database)
    monkeypatch.setattr(suite, "queue_shard", lambda *_, **__: None)
    monkeypatch.setattr(suite.settings, "SHARD_ATTEMPTS", 2)
    return database


def run_suite(
    database: Database, monkeypatch: pytest.MonkeyPatch, **suites: dict[str, Any]
) -> SuiteRun:
    """Start the command suite (the first of ``suites``) on MACHINE, run its shards: the run."""
    parsed = {name: CommandSuite.model_validate(s) for name, s in suites.items()}
    monkeypatch.setattr(suite.settings, "COMMAND_SUITES", parsed)
    tier = command_tier(next(iter(suites)))
    suite_run_id = suite.start_suite.apply(kwargs={"machine": MACHINE, "tier": tier}).get()
    with database.session_scope() as session:
        shard_ids = [s.id for s in session.get_one(SuiteRun, suite_run_id).shards]
    for shard_id in shard_ids:
        suite.run_shard.apply(kwargs={"shard_id": shard_id})
    with database.session_scope() as session:
        suite_run = session.get_one(SuiteRun, suite_run_id)
        _ = suite_run.shards
        session.expunge_all()
        return suite_run


def test_a_command_writing_a_dynamo_csv_is_read_back_through_the_api(
    eager_tasks: Database,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    client: TestClient,
) -> None:
    suite_run = run_suite(eager_tasks, monkeypatch, dynamo=dynamo_suite(tmp_path))
    assert (suite_run.status, suite_run.tier, suite_run.reason) == (
        "finished",
        "command:dynamo",
        "",
    )
    (shard,) = suite_run.shards
    assert (shard.label, shard.status, shard.attempts) == ("dynamo", "done", 1)
    run = client.get(f"/api/v1/runs/{suite_run.run_id}").json()
    assert (run["tier"], run["trigger"], run["machine"]["name"]) == (
        "command:dynamo",
        "schedule",
        MACHINE,
    )
    assert run["extra"]["command"]["name"] == "dynamo"
    assert "env" not in run["extra"]["command"]  # values may be secrets: not recorded
    by_metric = {r["metric"]: r for r in run["results"]}
    assert by_metric["speedup"]["value"] == pytest.approx(2.014039)
    speedup = by_metric["speedup"]
    assert (speedup["suite"], speedup["model"], speedup["precision"], speedup["mode"]) == (
        "torchbench",
        "BERT_pytorch",
        "amp",
        "inference",
    )
    assert by_metric["abs_latency"]["value"] == pytest.approx(58.90128)
    listed = client.get("/api/v1/suite-runs", params={"machine": MACHINE}).json()["items"]
    assert [item["status"] for item in listed] == ["finished"]


def test_a_failing_command_records_its_exit_status_and_stderr(
    eager_tasks: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = "import sys; print('loading model', file=sys.stderr); sys.exit(7)"
    suite_run = run_suite(eager_tasks, monkeypatch, broken=python(code))
    (shard,) = suite_run.shards
    assert (shard.status, shard.attempts) == ("failed", 2)  # retried as a tier shard is
    assert shard.reason == (
        "failed 2 times; last: the command exited with status 7; output: loading model"
    )
    assert suite_run.status == "failed"
    assert suite_run.reason == f"no results: broken: {shard.reason}"
    assert suite_run.run_id is None


def test_a_command_that_hangs_is_killed_at_its_timeout(
    eager_tasks: Database, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pid"
    code = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(600)"
    monkeypatch.setattr(suite.settings, "SHARD_ATTEMPTS", 1)
    suite_run = run_suite(eager_tasks, monkeypatch, hangs=python(code, timeout_s=1.5))
    (shard,) = suite_run.shards
    assert shard.status == "failed"
    assert "the command did not finish within 2 s and was killed" in shard.reason
    with pytest.raises(ProcessLookupError):  # the hung process is gone
        os.kill(int(pid_file.read_text()), 0)
    assert suite_run.status == "failed"


def test_a_command_that_writes_nothing_fails_with_a_clear_reason(
    eager_tasks: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = "import os; open(os.environ['BENCHWATCH_OUTPUT_DIR'] + '/log.txt', 'w').write('x')"
    suite_run = run_suite(eager_tasks, monkeypatch, quiet=python(code, outputs=["*.csv"]))
    (shard,) = suite_run.shards
    assert (shard.status, shard.attempts) == ("failed", 1)  # not retried: it would do the same
    assert shard.reason == (
        "failed (not retried): the command wrote no file matching ['*.csv'] in "
        "$BENCHWATCH_OUTPUT_DIR (it wrote ['log.txt'])"
    )
    assert suite_run.status == "failed"


def test_a_file_that_does_not_parse_fails_with_where(
    eager_tasks: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = (
        "import os; open(os.environ['BENCHWATCH_OUTPUT_DIR'] + '/out.csv', 'w')"
        ".write('dev,name,batch_size,speedup\\ncpu,BERT,2,fast\\n')"
    )
    hints = {"suite": "torchbench", "config": "default", "precision": "fp32", "mode": "inference"}
    suite_run = run_suite(eager_tasks, monkeypatch, bad=python(code, hints=hints))
    (shard,) = suite_run.shards
    assert shard.status == "failed"
    assert shard.reason.startswith(
        "failed (not retried): the command's output could not be read: out.csv line 2"
    ), shard.reason
    assert "speedup" in shard.reason


def test_settings_refuse_a_bad_command_suite() -> None:
    good = {"command": ["python", "bench.py"]}
    assert Settings(COMMAND_SUITES={"ok": good}).COMMAND_SUITES["ok"].outputs == ["**/*"]
    bad: list[dict[str, Any]] = [
        {"x y": good},  # a name the tier cannot hold
        {"a" * 25: good},
        {"s": {"command": []}},
        {"s": {"command": [""]}},
        {"s": {**good, "outputs": ["/tmp/*.csv"]}},
        {"s": {**good, "outputs": ["../*.csv"]}},
        {"s": {**good, "format": "Not A Format"}},
        {"s": {**good, "timeout_s": 0}},
        {"s": {**good, "shell": True}},  # no such field: refused, not ignored
        {"s": {**good, "env": {"BENCHWATCH_OUTPUT_DIR": "/tmp"}}},
        {"s": {**good, "hints": {"mode": "sideways"}}},
    ]
    for suites in bad:
        with pytest.raises(ValidationError):
            Settings(COMMAND_SUITES=suites)


def test_settings_from_the_environment_refuse_a_bad_suite_at_start(tmp_path: Path) -> None:
    """A worker (any process reading the settings) does not start on a bad definition."""
    import subprocess

    env = {**os.environ, "BENCHWATCH_COMMAND_SUITES": json.dumps({"s": {"command": "ls"}})}
    done = subprocess.run(
        [sys.executable, "-c", "import app.core.config"],
        env=env,
        capture_output=True,
        text=True,
        cwd=Path(__file__).parents[2],
        timeout=60,
    )
    assert done.returncode != 0
    assert "COMMAND_SUITES" in done.stderr


def test_beat_schedules_a_command_suite_and_refuses_an_unknown_one() -> None:
    suites = {"dynamo": {"command": ["python", "bench.py"]}}
    schedules = [{"machine": "h100-a", "command": "dynamo", "cron": "0 3 * * *"}]
    config = Settings(COMMAND_SUITES=suites, SCHEDULES=schedules)
    entry = beat_schedule(config)["suite-h100-a-command:dynamo"]
    assert entry["kwargs"] == {"machine": "h100-a", "tier": "command:dynamo", "channel": "nightly"}
    assert entry["options"] == {"queue": "bench.h100-a"}
    with pytest.raises(ValueError, match="command suite 'other', not in BENCHWATCH_COMMAND"):
        beat_schedule(Settings(SCHEDULES=[{"machine": "h100-a", "command": "other"}]))


def test_tier_names_and_formats() -> None:
    assert command_name(command_tier("dynamo")) == "dynamo"
    assert command_name("daily") is None
    assert Schedule(machine="m", command="x").suite_tier == "command:x"
    # Every upload parser, no other: a format no parser reads stops the process at start.
    for name in ("auto", *BY_NAME):
        check_settings(Settings(COMMAND_SUITES={"s": {"command": ["x"], "format": name}}))
    for name in ("native", "csv"):
        unread = Settings(COMMAND_SUITES={"s": {"command": ["x"], "format": name}})
        with pytest.raises(ValueError, match=rf"\['s'\]\.format '{name}': one of auto, torch-"):
            check_settings(unread)


def test_a_worker_whose_settings_lack_the_suite_refuses_to_start_it(
    eager_tasks: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(suite.settings, "COMMAND_SUITES", {})
    with pytest.raises(ValueError, match="no command suite 'gone'"):
        suite.start_suite.apply(kwargs={"machine": MACHINE, "tier": "command:gone"}).get()
    with eager_tasks.session_scope() as session:
        assert session.scalar(select(SuiteRun)) is None
    triggered = queued(eager_tasks, machine=MACHINE, tier="command:gone")
    kwargs = {"machine": MACHINE, "tier": "command:gone", "suite_run_id": triggered}
    with pytest.raises(ValueError, match="no command suite 'gone'"):
        suite.start_suite.apply(kwargs=kwargs).get()
    with eager_tasks.session_scope() as session:
        suite_run = session.get_one(SuiteRun, triggered)  # failed, not queued for ever
        assert suite_run.status == "failed"
        assert suite_run.reason.startswith("no command suite 'gone' in this worker's")


def test_a_triggered_command_suite_is_adopted_and_run(
    eager_tasks: Database, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    command = CommandSuite.model_validate(dynamo_suite(tmp_path))
    monkeypatch.setattr(suite.settings, "COMMAND_SUITES", {"dynamo": command})
    triggered = queued(eager_tasks, machine=MACHINE, tier="command:dynamo")
    kwargs = {"machine": MACHINE, "tier": "command:dynamo", "suite_run_id": triggered}
    assert suite.start_suite.apply(kwargs=kwargs).get() == triggered
    with eager_tasks.session_scope() as session:
        (shard_id,) = [s.id for s in session.get_one(SuiteRun, triggered).shards]
    suite.run_shard.apply(kwargs={"shard_id": shard_id})
    with eager_tasks.session_scope() as session:
        suite_run = session.get_one(SuiteRun, triggered)
        assert suite_run.status == "finished"
        run = session.get_one(Run, suite_run.run_id)
        assert (run.commit, run.tier) == ("abc123", "command:dynamo")
        assert set(run.extra) >= {"command", "request"}


@pytest.mark.slow
def test_a_real_worker_runs_a_triggered_command_suite_that_writes_a_dynamo_csv(
    postgres_database: Database, redis_url: str, tmp_path: Path
) -> None:
    """``benchwatch trigger --command`` queues what beat's schedule would (the entry is
    test_beat_schedules_a_command_suite_and_refuses_an_unknown_one's), without its cron wait."""
    suites = {"dynamo": dynamo_suite(tmp_path)}
    env = environment(postgres_database, redis_url, BENCHWATCH_COMMAND_SUITES=json.dumps(suites))
    log = tmp_path / "workers.log"
    with benchwatch(["worker", "--machine", MACHINE, "--queues", "default"], env, log):
        trigger = ["trigger", "--machine", MACHINE, "--command", "dynamo"]
        done = subprocess.run(
            [sys.executable, "-m", "workers.cli", *trigger],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert f"queued a command:dynamo suite run on bench.{MACHINE}" in done.stdout
        wait_for("the suite run to finish", lambda: finished(postgres_database), 300, log)

    settings = Settings(DATABASE_URL=postgres_database.url, TOKEN_PEPPER=PEPPER)
    application = create_app(settings)
    with TestClient(application) as client:
        (run,) = client.get("/api/v1/runs").json()["items"]
        assert (run["trigger"], run["tier"]) == ("manual", "command:dynamo")
        assert run["machine"]["name"] == MACHINE
        results = client.get(f"/api/v1/runs/{run['id']}").json()["results"]
        (suite_run,) = client.get("/api/v1/suite-runs").json()["items"]
    application.state.database.dispose()
    assert suite_run["status"] == "finished"
    by_metric = {r["metric"]: r for r in results}
    assert len(by_metric) == 13  # every column of the CSV
    assert by_metric["speedup"]["model"] == "BERT_pytorch"
    assert by_metric["speedup"]["value"] == pytest.approx(2.014039)
    assert by_metric["dynamo_peak_mem"]["value"] == pytest.approx(271.536947)
