"""A built-in case localized (issue 28 point 1): a worker's tier case measured in probe
environments by the worker's own harness (``workers.case_probe``).

The case is the test tier's softmax (eager, fp32, inference, CPU: the smallest of the tiers'
operators, a tenth of a millisecond). The good and bad environments differ in one local
package, tinypkg 1 and 2, which the case never imports; tinypkg 2's wheel carries a ``.pth``
file that sets ``ATEN_CPU_CAPABILITY=default`` in every Python of its environment (as a
package's start-up hook can), so torch runs its scalar kernels there: the softmax is about
7 times slower. That the bad side measures slower proves that the probe ran in the probe
environment's own interpreter, where the wheel is installed, and not in the worker's.

``Search`` is driven directly with the worker's own measuring (``repro.suite_of`` and
``repro.measuring``, the pip provider, its cache), not through a Celery worker: each probe
process imports torch, seconds each. A case name no tier has fails the localization with the
probe's one-line reason. ``benchwatch repro`` of a worker's regression of the case prints the
module's command.
"""

import json
import os
import shlex
import statistics
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.core.command_suites import CommandSuite
from app.core.config import Settings
from app.core.db import Database
from app.kernels import service as kernels
from app.localization.judge import SCHEDULE
from app.localization.lifecycle import Costs, ProbeRow
from tests.factories import run_payload
from tests.localization.test_cli import printed
from tests.localization.test_providers import make_wheel
from tests.localization.test_requests import WORKER_LEVELS
from tests.posting import post_detected
from workers import case_probe, repro
from workers.localize import Found, Oracle, Search

MACHINE = "cpu-box"
IDENTITY = {
    "suite": "benchwatch-operators",
    "model": "softmax",
    "category": "operator",
    "mode": "inference",
    "precision": "fp32",
    "config": "eager",
    "batch_size": 64,
}
# What a localization of a worker's regression of the case stores (app.localization.service).
CASE = {
    **IDENTITY,
    "params": {},
    "tier": "test",
    "channel": "nightly",
    "metric": "latency",
    "unit": "ms",
    "higher_is_better": False,
}
RECORDED = {"torch": "2.6.0", "python": "3.11.7"}  # the same on both sides: never probed
GOOD, BAD = RECORDED | {"tinypkg": "1"}, RECORDED | {"tinypkg": "2"}
SCALAR = 'import os; os.environ.setdefault("ATEN_CPU_CAPABILITY", "default")\n'
PROBE = [sys.executable, "-m", case_probe.MODULE]


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("wheels")
    make_wheel(folder, "tinypkg", "1", '__version__ = "1"\n')
    slow = make_wheel(folder, "tinypkg", "2", '__version__ = "2"\n')
    # pip installs a file the wheel's RECORD does not list (and lists it in what it installs).
    with zipfile.ZipFile(slow, "a") as archive:
        archive.writestr("tinypkg-scalar.pth", SCALAR)
    return folder


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory, wheels: Path) -> Settings:
    """The worker's settings: the pip provider (the default), its cache and wheel folder."""
    cache = tmp_path_factory.mktemp("envs")
    return Settings(ENV_CACHE=str(cache), PIP_FIND_LINKS=[str(wheels)])


def search(config: Settings, case: dict[str, Any]) -> tuple[Found, list[ProbeRow]]:
    """The worker's search for ``case`` between GOOD and BAD, and the probes it reported."""
    suite = repro.suite_of(case, config)
    assert isinstance(suite, CommandSuite), suite
    rows: list[ProbeRow] = []

    def report(row: ProbeRow, costs: Costs) -> None:
        rows.append(row)

    found = Search(Oracle(repro.measuring(suite, MACHINE, config), case), GOOD, BAD, {}, report)
    return found.run(), rows


@pytest.mark.slow
def test_a_built_in_case_is_measured_in_each_environment_and_localized(config: Settings) -> None:
    found, rows = search(config, CASE)

    assert found.state == "culprit_found", (found.reason, found.answer)
    assert found.answer["culprit"] == {
        "kind": "component",
        "names": ["tinypkg"],
        "versions": {"tinypkg": ["1", "2"]},
    }
    assert found.answer["preflight"]["reproduced"] is True
    # The pre-flight's two references; each probe process made the first round's samples
    # (10, the test tier's 3 timed calls raised to them), and a loaded machine may have the
    # pre-flight grow by a round or more.
    references = {row.label: row for row in rows}
    assert set(references) == {"last good (reference)", "first bad (reference)"}, rows
    for row in rows:
        assert len(row.samples) == SCHEDULE[0] * row.rounds, row
        assert all(0 < sample < 1000 for sample in row.samples), row  # ms of one call
    good = references["last good (reference)"].samples
    bad = references["first bad (reference)"].samples
    assert statistics.median(bad) > 2 * statistics.median(good), (good, bad)
    assert found.costs.builds == 2
    assert found.costs.samples == len(good) + len(bad)
    # Each probe kept the case's kernel profile in its environment: the diff of the two
    # references names aten's softmax, slower with the scalar kernels (issue 29 point 1).
    profiles = [references[f"{side} (reference)"].kernels for side in ("last good", "first bad")]
    assert all(p is not None and p["timing"] == "cpu_self" for p in profiles), profiles
    stored = [kernels.stored_profile(kernels.case_profile(0, p)) for p in profiles if p]
    top = kernels.diff_of(*stored, toward="slower").kernels[0]  # as a probe's is diffed
    assert ("softmax" in top.name, top.change) == (True, "slower"), top


@pytest.mark.slow
def test_a_case_no_tier_has_fails_the_localization_with_the_probes_reason(
    config: Settings,
) -> None:
    found, rows = search(config, {**CASE, "model": "no_such_op"})

    assert found.state == "failed", (found.reason, found.answer)
    assert found.reason.startswith("the good reference failed: the command failed"), found.reason
    assert "exited with status 2" in found.reason
    line = "benchwatch case probe: tier test measures no benchwatch-operators/no_such_op"
    assert line in found.reason, found.reason
    assert rows == []
    assert found.costs.samples == 0


def probe(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The module run by hand, outside any probe environment."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("BENCHWATCH_")}
    return subprocess.run(
        [*PROBE, *args], env=base | env, capture_output=True, text=True, timeout=120, check=False
    )


def test_a_crafted_case_run_by_hand_exits_2_with_one_line() -> None:
    unknown_tier = json.dumps({**IDENTITY, "tier": "nightly\nrm -rf /"})
    huge = json.dumps({**IDENTITY, "tier": "test", "model": "m" * 100_000})
    for argument, expected in (
        (unknown_tier, "tier nightly rm -rf / is not a built-in tier (test, smoke, daily,"),
        (huge, "CASE is 100"),
    ):
        done = probe(argument)
        assert done.returncode == 2, done.stderr
        assert done.stdout == ""
        lines = done.stderr.splitlines()
        assert len(lines) == 1, done.stderr[:1000]
        assert len(lines[0]) < 400, lines[0]
        assert lines[0].startswith(f"benchwatch case probe: {expected}"), lines[0]


@pytest.mark.parametrize(
    ("argument", "expected"),
    [
        ("not json", "CASE is not JSON: "),
        ("[1, 2]", "CASE is a JSON list, not an object of tier, suite, model"),
        (json.dumps({"tier": "test"}), "CASE has the fields tier, suite, model, category, mode"),
        (json.dumps({**IDENTITY, "tier": "test", "x": 1}), "CASE has the fields tier"),
        (json.dumps({**IDENTITY, "tier": "test", "batch_size": True}), "CASE batch_size True"),
        (json.dumps({**IDENTITY, "tier": "test", "mode": 7}), "CASE mode 7: a string"),
        (json.dumps({**IDENTITY, "tier": "test", "model": "m" * 300}), "CASE model is 300"),
    ],
)
def test_a_case_that_is_no_case_is_one_line_before_torch(
    argument: str, expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert case_probe.main([argument]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith(f"benchwatch case probe: {expected}"), err


def test_another_interpreter_than_the_probe_environments_is_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    argument = case_probe.case_argument(CASE)
    monkeypatch.setenv("BENCHWATCH_PYTHON", str(tmp_path / "env" / "bin" / "python"))
    assert case_probe.main([argument]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"benchwatch case probe: this is {sys.executable}, not the probe"), err
    monkeypatch.delenv("BENCHWATCH_PYTHON")
    monkeypatch.setenv("BENCHWATCH_IMAGE", "registry.example/torch:nightly")
    assert case_probe.main([argument]) == 2
    assert "the provider prepared an image" in capsys.readouterr().err


def test_the_built_in_suite_is_the_module_in_the_probes_python() -> None:
    suite = repro.suite_of(CASE, Settings(PIN_CORES="off"))
    assert isinstance(suite, CommandSuite), suite
    assert suite.command[:5] == ["python", "-m", "workers.case_probe", "--repeats", "10"]
    assert json.loads(suite.command[5]) == {**IDENTITY, "tier": "test"}
    assert (suite.env, suite.outputs, suite.format) == (
        {"BENCHWATCH_PIN_CORES": "off"},
        ["case.json"],
        "native",
    )
    # A tier that is neither built in nor a command suite's, a case without its identity.
    assert "is not a built-in tier" in str(repro.suite_of({**CASE, "tier": "weekly"}))
    missing = {k: v for k, v in CASE.items() if k != "config"}
    assert "missing config" in str(repro.suite_of(missing))


def regression(client: TestClient, headers: dict[str, str]) -> int:
    """A worker's test-tier nightlies of the case, tinypkg 1 then 2: the step's id."""
    for index, value in enumerate(WORKER_LEVELS):
        row = {**IDENTITY, "metric": "latency", "unit": "ms", "value": value}
        row["samples"] = [value * (1 + 0.002 * (i % 5)) for i in range(10)]
        payload = run_payload(
            f"nightly-{index}", [row], machine=MACHINE, device="cpu", index=index, tier="test"
        )
        payload["environment"] = {
            "channel": "nightly",
            "torch": RECORDED["torch"],
            "packages": {"tinypkg": GOOD["tinypkg"] if index < 12 else BAD["tinypkg"]},
        }
        post_detected(client, headers, payload)
    (step,) = client.get("/api/v1/regressions").raise_for_status().json()["items"]
    return int(step["id"])


def repro_cli(database: Database, config: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCHWATCH_")}
    env |= {
        "BENCHWATCH_DATABASE_URL": database.url,
        "BENCHWATCH_ENV_CACHE": str(config.ENV_CACHE),
        "BENCHWATCH_PIP_FIND_LINKS": json.dumps(config.PIP_FIND_LINKS),
        "BENCHWATCH_PIN_CORES": "auto",
    }
    return subprocess.run(
        [sys.executable, "-m", "workers.cli", "repro", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_repro_of_a_built_in_case_prints_the_module_command(
    client: TestClient, database: Database, worker_headers: dict[str, str], config: Settings
) -> None:
    step = regression(client, worker_headers)
    shown = repro_cli(database, config, f"regression:{step}")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    out = shown.stdout
    what = f"regression {step} on {MACHINE}: benchwatch-operators/softmax latency (ms), tier test"
    assert what in out, out
    for side, version in (("good", "1"), ("bad", "2")):
        spec = {"components": {"tinypkg": {"version": version}}}
        assert json.loads(printed(out, side, "spec")) == spec
        measure = shlex.split(printed(out, side, "measure"))
        assert measure[0] == "env", measure
        assert "BENCHWATCH_PIN_CORES=auto" in measure, measure
        module = measure.index("python")
        assert measure[module : module + 5] == [
            "python",
            "-m",
            "workers.case_probe",
            "--repeats",
            "10",
        ]
        assert json.loads(measure[module + 5]) == {**IDENTITY, "tier": "test"}
    assert "reads: the files matching ['case.json'] in $BENCHWATCH_OUTPUT_DIR, as native" in out
