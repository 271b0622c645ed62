"""A pool of two real Celery workers (two nodes of one machine) shares one suite run."""

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from celery import Celery
from sqlalchemy import select

from app.core.command_suites import command_tier
from app.core.db import Database
from app.jobs import START_SUITE, bench_queue
from app.runs.models import Run
from app.runs.reads import list_run_results
from app.suite_runs.models import SuiteRun
from tests.suite_runs.test_workers import benchwatch, environment, finished, wait_for

MACHINE = "pool-box"
NODES = ("node-a", "node-b")
# Each shard writes three Google Benchmark timings of its own; it first waits (a while at
# most) until the other shard has started, so the run ends only if both ran at once: on two
# nodes, each taking one shard.
SCRIPT = """
import json, os, pathlib, sys, time
index = os.environ["BENCHWATCH_SHARD_INDEX"]
gate = pathlib.Path(sys.argv[1])
(gate / f"started-{index}").touch()
deadline = time.monotonic() + 20
while len(list(gate.glob("started-*"))) < 2 and time.monotonic() < deadline:
    time.sleep(0.05)
benchmarks = [
    {"name": f"pool_{index}_{k}", "run_name": f"pool_{index}_{k}", "run_type": "iteration",
     "iterations": 100, "real_time": 1.0 + k, "cpu_time": 1.0 + k, "time_unit": "ms"}
    for k in range(3)
]
context = {"date": "2026-12-01 00:00:00", "host_name": "pool", "num_cpus": 1}
out = pathlib.Path(os.environ["BENCHWATCH_OUTPUT_DIR"]) / "bench.json"
out.write_text(json.dumps({"context": context, "benchmarks": benchmarks}))
"""


@pytest.mark.slow  # two worker processes start (about 10 s on 2 cores), one imports torch
def test_a_pool_of_two_workers_shares_one_suite_run(
    postgres_database: Database, redis_url: str, tmp_path: Path
) -> None:
    script, gate = tmp_path / "bench.py", tmp_path / "gate"
    script.write_text(SCRIPT)
    gate.mkdir()
    suites = {
        "pool": {
            "command": [sys.executable, str(script), str(gate)],
            "format": "google-benchmark",
            "shards": 2,
        }
    }
    env = environment(postgres_database, redis_url, BENCHWATCH_COMMAND_SUITES=json.dumps(suites))
    log = tmp_path / "workers.log"
    with (
        benchwatch(["worker", "--machine", MACHINE, "--node", NODES[0]], env, log),
        benchwatch(["worker", "--machine", MACHINE, "--node", NODES[1]], env, log),
    ):
        # Both consume the machine's queue before the run is queued.
        ready = [f"{MACHINE}@{node} ready" for node in NODES]
        wait_for("both nodes", lambda: all(r in log.read_text() for r in ready), 120, log)
        sender = Celery(broker=redis_url)
        kwargs = {"machine": MACHINE, "tier": command_tier("pool"), "trigger": "manual"}
        sender.send_task(START_SUITE, kwargs=kwargs, queue=bench_queue(MACHINE))
        sender.close()
        wait_for("the suite run to finish", lambda: finished(postgres_database), 120, log)

    with postgres_database.session_scope() as session:
        (suite_run,) = session.scalars(select(SuiteRun)).all()
        (run,) = session.scalars(select(Run)).all()
        assert (suite_run.status, suite_run.run_id) == ("finished", run.id)
        ran_by = {shard.position: shard.worker for shard in suite_run.shards}
        assert {shard.status for shard in suite_run.shards} == {"done"}
        assert sorted(ran_by.values()) == list(NODES)  # each node ran one shard
        rows = list_run_results(session, run.id)
        extra: dict[str, Any] = run.extra
    assert len(rows) == 12  # real and CPU time of 3 benchmarks in each of 2 shards
    for row in rows:  # "pool_<shard>_<k>": the node of the shard that measured it
        assert row["extra"]["node"] == ran_by[int(row["model"].split("_")[1])], row
    # Two nodes: judged against each other, which needs a history this first run lacks.
    assert extra["pool"]["flagged"] == []
    assert sorted(n["node"] for n in extra["pool"]["nodes"]) == list(NODES)
