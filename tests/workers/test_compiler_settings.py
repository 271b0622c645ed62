"""A compiled run's compiler settings: recorded (JSON, capped), and applied to a probe's Python
by the settings hook, whatever the command does."""

import json
import subprocess
import sys
from typing import Any

import pytest
import torch
import torch._dynamo.config
import torch._inductor.config

from workers import compiler_settings
from workers.compiler_settings import (
    MAX_SETTINGS,
    MAX_VALUE,
    SETTINGS_VARIABLE,
    Configured,
    recorded_settings,
    settings_environment,
)
from workers.harness import Case, Plan, measure

READ = (
    "import os, torch._inductor.config as c, torch._dynamo.config as d; "
    "print(c.cpp.simdlen, c.fallback_random, d.suppress_errors, "
    "os.environ.get('TORCHINDUCTOR_FOO'))"
)


def test_variables_and_changed_config_values_are_recorded() -> None:
    env = {"TORCHINDUCTOR_FREEZING": "1", "TORCH_COMPILE_DEBUG": "0", "BENCHWATCH_X": "no"}
    with torch._inductor.config.patch({"cpp.simdlen": 1}):
        found = recorded_settings(env=env, options={"cpp_wrapper": True})
    assert found == {
        "env.TORCHINDUCTOR_FREEZING": "1",
        "env.TORCH_COMPILE_DEBUG": "0",
        "inductor.cpp.simdlen": 1,
        "inductor.cpp_wrapper": True,
    }
    assert recorded_settings(env={}) == {}  # the patch is over: the defaults again


def test_values_are_json_and_capped() -> None:
    assert compiler_settings.json_value(("a", 1)) == ["a", 1]
    assert compiler_settings.json_value(float("inf")) == "inf"
    assert compiler_settings.json_value("x" * 1000) == "x" * MAX_VALUE
    assert compiler_settings.json_value(print).startswith("<built-in function print")
    assert len(compiler_settings.json_value(list(range(1000)))) == MAX_VALUE  # its repr, cut
    many = {f"TORCHINDUCTOR_V{i:03d}": "1" for i in range(3 * MAX_SETTINGS)}
    found = recorded_settings(env=many)
    assert list(found) == sorted(f"env.{name}" for name in many)[:MAX_SETTINGS]


def run_with(settings: dict[str, Any], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    made = settings_environment(env, settings)
    return subprocess.run(
        [sys.executable, "-c", READ], env=made, capture_output=True, text=True, timeout=120
    )


def test_a_probe_runs_under_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = {
        "inductor.cpp.simdlen": 1,
        "inductor.fallback_random": True,
        "dynamo.suppress_errors": True,
        "env.TORCHINDUCTOR_FOO": None,  # the bad run had none: taken out
    }
    done = run_with(settings, {"PATH": "/usr/bin:/bin", "TORCHINDUCTOR_FOO": "1"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "True", "True", "None"]
    assert run_with({}, {"PATH": "/usr/bin:/bin"}).stdout.split() == [
        "None",
        "False",
        "False",
        "None",
    ]
    made = settings_environment({}, {"env.TORCHINDUCTOR_FOO": "2", "max_autotune": True})
    assert made == {"TORCHINDUCTOR_FOO": "2"}  # a name of no known kind is not applied


def test_a_setting_torch_does_not_know_fails_the_probe() -> None:
    done = run_with({"inductor.no_such_setting": 1}, {"PATH": "/usr/bin:/bin"})
    assert done.returncode != 0
    assert "no setting 'no_such_setting'" in done.stderr


def test_an_environment_under_settings_is_its_own_probe() -> None:
    from app.core.providers import EnvSpec

    spec = EnvSpec(components={})
    assert Configured(spec).canonical() == spec.canonical()
    one = Configured(spec, {"inductor.cpp.simdlen": 1}).canonical()
    assert one != spec.canonical()
    assert json.loads(one.split(" ", 1)[1]) == {"inductor.cpp.simdlen": 1}
    assert SETTINGS_VARIABLE.startswith("BENCHWATCH_")


def test_a_compiled_case_records_what_it_compiled_under() -> None:
    case = Case(
        "ops",
        "sin_add",
        "pointwise",
        1,
        lambda device, dtype: (
            lambda x: x.sin() + 1,
            (torch.randn(64, device=device, dtype=dtype),),
        ),
    )
    with torch._inductor.config.patch(fallback_random=True):
        rows = measure(case, "default", "fp32", torch.device("cpu"), Plan(repeats=2, warmup=1))
    (latency,) = [row for row in rows if row["metric"] == "latency"]
    assert latency["extra"]["compiler_settings"] == {"inductor.fallback_random": True}
    eager = measure(case, "eager", "fp32", torch.device("cpu"), Plan(repeats=2, warmup=1))
    (latency,) = [row for row in eager if row["metric"] == "latency"]
    assert "compiler_settings" not in latency.get("extra", {})
