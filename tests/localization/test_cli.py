"""``benchwatch localize`` and ``benchwatch repro`` (issue 28 points 1 and 7).

A CI series of the suite ``tinybench`` (mapped to the command suite ``tiny``, as in the end to
end test) steps up between two versions of tinypkg. ``repro`` prints the pre-flight's specs
as the worker's search makes them (commits of the clone where BENCHWATCH_LOCALIZE_SOURCES has
it), a prepare command that really prepares the good one, and with ``--run`` measures both
sides through an operator's provider that makes a directory with a ``python`` in it and a
command that prints known samples. ``localize`` queues one as the API does and sends it to
the machine's queue in Redis.
"""

import argparse
import getpass
import json
import os
import shlex
import socket
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient
from sqlalchemy import update

from app.core.db import Database
from app.localization.models import Localization
from tests.factories import run_payload
from tests.localization import tinypkg
from tests.localization.test_end_to_end import CASE, MACHINE
from tests.localization.test_requests import WORKER_LEVELS
from tests.posting import post_detected
from workers.cli import main
from workers.cli.localize import finding

BENCHWATCH = [sys.executable, "-m", "workers.cli"]
# An operator's provider: a directory with a python in it (the test's own interpreter) and
# the version it stands for; the version named by FAIL_ON does not build.
PROVIDER = r"""
import json, os, sys
version = json.load(sys.stdin)["components"]["tinypkg"]["version"]
if version == os.environ.get("FAIL_ON"):
    print(json.dumps({"unbuildable": f"tinypkg {version} does not compile"}))
    sys.exit(0)
env = os.environ["BENCHWATCH_ENV_DIR"]
os.makedirs(os.path.join(env, "bin"))
os.symlink(sys.executable, os.path.join(env, "bin", "python"))
with open(os.path.join(env, "version.txt"), "w") as out:
    out.write(version)
print("built", version)
print(json.dumps({"python": os.path.join(env, "bin", "python")}))
"""
# The command suite: five samples of a level its environment's version says, as
# pytest-benchmark JSON (seconds; the case is in ms).
BENCH = r"""
import json, os, pathlib, sys
# The pre-flight measures both sides under the good run's compiler settings.
if os.environ.get("TORCHINDUCTOR_TINY") != "1":
    sys.exit(f"TORCHINDUCTOR_TINY is {os.environ.get('TORCHINDUCTOR_TINY')!r}")
here = pathlib.Path(os.environ["BENCHWATCH_PYTHON"]).parent.parent
level = {"1.0": 10.0, "2.0": 14.0}[(here / "version.txt").read_text()]
data = [level * (1 + 0.001 * i) / 1000 for i in range(5)]
entry = {"name": "test_op", "fullname": "bench.py::test_op", "group": None, "params": None,
         "stats": {"median": data[2], "min": data[0], "max": data[-1], "data": data}}
document = {"benchmarks": [entry], "machine_info": {}, "commit_info": {},
            "datetime": "2026-01-01T00:00:00", "version": "4.0.0"}
with open(os.path.join(os.environ["BENCHWATCH_OUTPUT_DIR"], "bench.json"), "w") as out:
    json.dump(document, out)
"""


def regression(
    client: TestClient,
    headers: dict[str, str],
    versions: tuple[str, str],
    settings: tuple[dict[str, Any], dict[str, Any]] = ({}, {}),
) -> int:
    """Nightlies of the tiny case uploaded by CI, tinypkg (and compiler ``settings``) good then
    bad: the step's id."""
    for index, value in enumerate(WORKER_LEVELS):
        row = {
            **{k: v for k, v in CASE.items() if k not in ("category", "batch_size")},
            "value": value,
            "samples": [value * (1 + 0.002 * (i % 5)) for i in range(10)],
        }
        payload = run_payload(f"nightly-{index}", [row], machine=MACHINE, device="cpu", index=index)
        side = 0 if index < 12 else 1
        payload["environment"] = {
            "channel": "nightly",
            "packages": {"tinypkg": versions[side]},
            "compiler_options": settings[side],
        }
        post_detected(client, headers, payload)
    (step,) = client.get("/api/v1/regressions").raise_for_status().json()["items"]
    return int(step["id"])


def environment(database: Database, suite: dict[str, Any], **settings: str) -> dict[str, str]:
    """The CLI's environment: this one, less BENCHWATCH_*, plus the database and the suites."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCHWATCH_")}
    return env | {
        "BENCHWATCH_DATABASE_URL": database.url,
        "BENCHWATCH_COMMAND_SUITES": json.dumps({tinypkg.COMMAND: suite}),
        "BENCHWATCH_LOCALIZE_SUITES": json.dumps({tinypkg.SUITE: tinypkg.COMMAND}),
        **settings,
    }


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*BENCHWATCH, *args], env=env, capture_output=True, text=True, timeout=300, check=False
    )


def printed(stdout: str, side: str, field: str) -> str:
    """A field of one side's block of ``repro``'s output (``spec``, ``prepare``, ``measure``)."""
    block = stdout.split(f"\n{side} (", 1)[1]
    line = next(line for line in block.splitlines() if line.strip().startswith(f"{field}:"))
    return line.split(":", 1)[1].strip()


def test_repro_prints_the_specs_the_worker_makes_and_a_prepare_that_prepares(
    client: TestClient, database: Database, ingest_headers: dict[str, str], tmp_path: Path
) -> None:
    tiny = tinypkg.make(tmp_path)
    step = regression(client, ingest_headers, (tiny.version(0), tiny.version(15)))
    env = environment(
        database,
        tiny.command_suite(),
        BENCHWATCH_LOCALIZE_SOURCES=json.dumps({"tinypkg": str(tiny.repo)}),
        BENCHWATCH_ENV_CACHE=str(tmp_path / "envs"),
    )
    shown = cli(env, "repro", f"regression:{step}")
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert f"regression {step} on {MACHINE}: tinybench/test_op latency (ms), tier command:tiny" in (
        out
    )
    # The versions name commits of the clone: the worker builds those, and so does repro.
    for side, index in (("good", 0), ("bad", tinypkg.COMMITS - 1)):
        spec = json.loads(printed(out, side, "spec"))
        commit = {"commit": tiny.commits[index], "source": str(tiny.repo)}
        assert spec == {"components": {"tinypkg": commit}}, out
        prepare = shlex.split(printed(out, side, "prepare"))
        assert prepare[:4] == ["benchwatch", "prepare", "--provider", "pip"]
        assert json.loads(prepare[4]) == spec
        measure = shlex.split(printed(out, side, "measure"))
        assert measure[0] == "env"
        assert measure[-2:] == ["python", str(tiny.script)]
        assert "BENCHWATCH_SHARD_COUNT=1" in measure
        assert "BENCHWATCH_OUTPUT_DIR=<an empty directory>" in measure
    # The good side's prepare command, run: the pip provider builds c0 into the cache.
    prepare = shlex.split(printed(out, "good", "prepare"))
    made = subprocess.run(
        [*BENCHWATCH, *prepare[1:]], env=env, capture_output=True, text=True, timeout=300
    )
    assert made.returncode == 0, made.stderr
    python = json.loads(made.stdout.splitlines()[-1])["python"]
    assert made.stderr.startswith(f"built: {tmp_path / 'envs'}")
    revision = subprocess.run(
        [python, "-c", "import tinypkg; print(tinypkg.REVISION)"], capture_output=True, text=True
    )
    assert revision.stdout.strip() == "0", revision.stderr
    again = cli(env, *prepare[1:])  # the same spec: the cache's entry
    assert again.stderr.startswith("from the cache: ")
    assert json.loads(again.stdout.splitlines()[-1]) == {"python": python}


def test_repro_says_in_one_line_when_a_github_source_cannot_be_read(
    client: TestClient, database: Database, ingest_headers: dict[str, str], tmp_path: Path
) -> None:
    tiny = tinypkg.make(tmp_path)
    step = regression(client, ingest_headers, (tiny.version(0), tiny.version(15)))
    with socket.socket() as closed:  # a port nothing listens on once it is closed
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    env = environment(
        database,
        tiny.command_suite(),
        BENCHWATCH_LOCALIZE_SOURCES=json.dumps({"tinypkg": "github:o/tinypkg"}),
        BENCHWATCH_LOCALIZE_GITHUB_API_URL=f"http://127.0.0.1:{port}",
        BENCHWATCH_ENV_CACHE=str(tmp_path / "envs"),
    )
    shown = cli(env, "repro", f"regression:{step}")
    assert shown.returncode == 2, shown.stdout
    assert shown.stderr.startswith(f"benchwatch repro: regression {step}: github:o/tinypkg: ")
    assert "could not be read: ConnectError" in shown.stderr
    assert "Traceback" not in shown.stderr


def test_repro_run_measures_both_sides_and_a_build_failure_exits_1(
    client: TestClient, database: Database, ingest_headers: dict[str, str], tmp_path: Path
) -> None:
    tiny_settings = ({"env.TORCHINDUCTOR_TINY": "1"}, {"env.TORCHINDUCTOR_TINY": "2"})
    step = regression(client, ingest_headers, ("1.0", "2.0"), tiny_settings)
    (tmp_path / "provider.py").write_text(PROVIDER)
    (tmp_path / "bench.py").write_text(BENCH)
    suite = {
        "command": ["python", str(tmp_path / "bench.py")],
        "format": "pytest-benchmark",
        "hints": {"suite": tinypkg.SUITE, "device": "cpu"},
    }

    def provider(**env: str) -> dict[str, str]:
        defined = {"command": [sys.executable, str(tmp_path / "provider.py")], "env": env}
        return {
            "BENCHWATCH_PROVIDERS": json.dumps({"fake": defined}),
            "BENCHWATCH_LOCALIZE_PROVIDER": "fake",
            "BENCHWATCH_ENV_CACHE": str(tmp_path / "envs"),
        }

    ran = cli(environment(database, suite, **provider()), "repro", f"regression:{step}", "--run")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    out = ran.stdout
    assert json.loads(printed(out, "good", "spec")) == {
        "components": {"tinypkg": {"version": "1.0"}}
    }
    assert f"(runs {shlex.join([sys.executable, str(tmp_path / 'provider.py')])}" in out
    for side in ("good", "bad"):  # both under the good run's settings, as the worker measures
        assert json.loads(printed(out, side, "under")) == {"env.TORCHINDUCTOR_TINY": "1"}
        assert "TORCHINDUCTOR_TINY=1" in shlex.split(printed(out, side, "measure"))
    # Ten samples each: the command ran twice (five a run), its seconds read as ms.
    expected = {"good": 10.0, "bad": 14.0}
    for side, level in expected.items():
        line = next(x for x in out.splitlines() if x.startswith(f"{side}: samples "))
        samples = json.loads(line.removeprefix(f"{side}: samples "))
        assert samples == pytest.approx([level * (1 + 0.001 * (i % 5)) for i in range(10)])
        prepared = next(x for x in out.splitlines() if x.startswith(f"{side}: prepared (built)"))
        assert prepared.endswith("/env/bin/python")
    good, bad = (statistics.median([v * (1 + 0.001 * i) for i in range(5)]) for v in (10, 14))
    assert f"median good {good:.6g}, bad {bad:.6g}: +40.0%" in out
    assert "pre-flight: reproduced: good 10.0" in out
    # After preparing, the measuring line names the environment's python first on PATH.
    measures = [x for x in out.splitlines() if x.strip().startswith("measure:")]
    assert any(f"PATH={tmp_path / 'envs'}" in line and ":$PATH" in line for line in measures)

    # The first bad version does not build: reported, exit 1, nothing measured of it.
    env = environment(database, suite, **provider(FAIL_ON="2.0"))
    failed = cli(env, "repro", f"regression:{step}", "--run", "--samples", "5")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "bad: does not build: tinypkg 2.0 does not compile" in failed.stdout
    assert "good: samples " in failed.stdout
    assert "bad: samples " not in failed.stdout


def test_localize_queues_one_as_the_api_does_and_repro_reads_it(
    client: TestClient,
    database: Database,
    ingest_headers: dict[str, str],
    redis_url: str,
    tmp_path: Path,
) -> None:
    step = regression(client, ingest_headers, ("1.0", "2.0"))
    suite = {"command": ["python", "bench.py"], "format": "pytest-benchmark"}
    env = environment(database, suite, BENCHWATCH_BROKER_URL=redis_url)
    asked = cli(env, "localize", f"regression:{step}")
    assert asked.returncode == 0, asked.stderr
    assert asked.stdout.splitlines() == ["localization 1 queued"]
    assert f"sent to the queue bench.{MACHINE}" in asked.stderr
    queued = redis.Redis.from_url(redis_url).lrange(f"bench.{MACHINE}", 0, -1)
    assert len(queued) == 1
    headers = json.loads(queued[0])["headers"]
    assert headers["task"] == "bench.localize"
    assert "'localization_id': 1" in headers["kwargsrepr"]
    with database.session_scope() as session:
        made = session.get_one(Localization, 1)
        assert made.started_by == f"cli:{getpass.getuser()}"
        assert (made.finding_kind, made.finding_id, made.state) == ("regression", step, "queued")
    # Asked again while it is queued: the same one, nothing sent.
    again = cli(env, "localize", f"regression:{step}")
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines() == ["localization 1 queued"]
    assert "already" in again.stderr
    assert redis.Redis.from_url(redis_url).llen(f"bench.{MACHINE}") == 1

    # repro of the localization prints what repro of its finding does.
    of_finding = cli(env, "repro", f"regression:{step}")
    of_localization = cli(env, "repro", "localization:1")
    assert of_localization.returncode == 0, of_localization.stderr
    assert of_localization.stdout.startswith(f"localization 1 of regression {step} on {MACHINE}")
    assert of_localization.stdout.splitlines()[1:] == of_finding.stdout.splitlines()[1:], (
        of_finding.stdout
    )

    # Errors, one line each, exit 2.
    with database.session_scope() as session:
        session.execute(update(Localization).values(state="failed"))
    spent = cli(env | {"BENCHWATCH_LOCALIZE_BUDGET": "1"}, "localize", f"regression:{step}")
    assert spent.returncode == 2
    assert f"machine {MACHINE} has run 1 localizations in 24 h" in spent.stderr
    unmapped = {k: v for k, v in env.items() if k != "BENCHWATCH_LOCALIZE_SUITES"}
    for command in ("localize", "repro"):
        refused = cli(unmapped, command, f"regression:{step}")
        assert refused.returncode == 2, refused.stdout
        assert f"no benchwatch worker measures tinybench/test_op on {MACHINE}" in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    for command, name, said in (
        ("localize", "regression:999", "regression 999 not found"),
        ("localize", "aggregate:5", "aggregate finding 5 not found"),
        ("repro", "failure:7", "failure 7 not found"),
        ("repro", "localization:9", "localization 9 not found"),
        ("localize", "localization:1", "give the finding (regression:ID"),
    ):
        missing = cli(env, command, name)
        assert missing.returncode == 2, (name, missing.stdout)
        assert said in missing.stderr
        assert len(missing.stderr.strip().splitlines()) == 1, missing.stderr
    no_broker = {k: v for k, v in env.items() if k != "BENCHWATCH_BROKER_URL"}
    without = cli(no_broker, "localize", f"regression:{step}")
    assert without.returncode == 2
    assert "set BENCHWATCH_BROKER_URL" in without.stderr


@pytest.mark.parametrize(
    "text",
    [
        "regression",
        "regression:",
        "regression:abc",
        "bug:1",
        "regression:0",
        "regression:-3",
        "regression:2147483648",
        "regression:١٢",
        "Regression:1",
        " regression:1",
    ],
)
def test_a_finding_that_is_not_one_is_a_usage_error(
    text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="names no finding"):
        finding(text)
    for command in ("repro", "localize"):
        with pytest.raises(SystemExit) as exited:
            main([command, text])
        assert exited.value.code == 2
        error = capsys.readouterr().err
        assert f"argument FINDING: {text!r} names no finding: give KIND:ID" in error


def test_a_finding_is_its_kind_and_id() -> None:
    assert finding("regression:12") == ("regression", 12)
    assert finding("failure:1") == ("failure", 1)
    assert finding("aggregate:2147483647") == ("aggregate", 2**31 - 1)
    assert finding("localization:3") == ("localization", 3)
