"""Pinning a shard's process to cores, its setting, and the CPU governor a run records."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from app.core.config import Settings
from app.core.cpu_cores import format_cores, parse_cores, parse_pin_cores
from workers.environment import cpu_governor
from workers.measurements import annotated
from workers.pinning import Pinning, auto_cores, plan_pinning

ROOT = Path(__file__).resolve().parents[2]
linux_only = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="Linux only")


def test_the_setting_reads_off_auto_and_core_lists() -> None:
    assert parse_pin_cores(" Auto ") == "auto"
    assert parse_pin_cores("off") == "off"
    assert parse_pin_cores("2-4,7") == frozenset({2, 3, 4, 7})
    assert parse_cores("0") == frozenset({0})
    assert format_cores({0, 1, 2, 5, 7, 8}) == "0-2,5,7-8"
    assert Settings(PIN_CORES="1-3").PIN_CORES == "1-3"


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("on", "'on' is not a core or a range"),
        ("", "'' is not a core"),
        ("3-1", "runs backwards"),
        ("1,,2", "'' is not a core"),
        ("0-99999", "over 8191"),
        ("²", "is not a core"),
        ("1-" + "9" * 600, "at most 512 characters"),
    ],
)
def test_a_bad_setting_is_refused_with_the_accepted_forms(value: str, why: str) -> None:
    with pytest.raises(ValueError, match=why) as refused:
        parse_pin_cores(value)
    assert "BENCHWATCH_PIN_CORES" in str(refused.value)
    assert "'off', 'auto' or a core list" in str(refused.value)
    with pytest.raises(ValidationError, match="PIN_CORES"):
        Settings(PIN_CORES=value)


def fake_sysfs(
    root: Path, cpus: int, smt: int = 1, nodes: list[str] | None = None, governors: str = ""
) -> Path:
    """A /sys/devices/system with ``cpus`` CPUs, ``smt`` siblings per core (Linux numbering:
    core i's siblings are i, i + cpus/smt, ...), NUMA nodes by cpulist and governors by CPU."""
    per = cpus // smt
    for cpu in range(cpus):
        topology = root / "cpu" / f"cpu{cpu}" / "topology"
        topology.mkdir(parents=True)
        siblings = sorted(cpu % per + per * k for k in range(smt))
        (topology / "thread_siblings_list").write_text(format_cores(siblings) + "\n")
    for index, cpulist in enumerate(nodes or []):
        (root / "node" / f"node{index}").mkdir(parents=True)
        (root / "node" / f"node{index}" / "cpulist").write_text(cpulist + "\n")
    for cpu, governor in enumerate(governors.split()):
        (root / "cpu" / f"cpu{cpu}" / "cpufreq").mkdir()
        (root / "cpu" / f"cpu{cpu}" / "cpufreq" / "scaling_governor").write_text(governor + "\n")
    return root


def test_auto_leaves_the_first_core_to_the_os_and_the_worker(tmp_path: Path) -> None:
    two = fake_sysfs(tmp_path / "two", 2)
    assert plan_pinning("auto", frozenset({0, 1}), two) == Pinning((1,), 1, "auto")
    sixteen = fake_sysfs(tmp_path / "sixteen", 16)
    assert auto_cores(frozenset(range(16)), sixteen) == tuple(range(1, 16))
    # 8 cores with 2 threads each: one CPU per physical core, the first core's two left out.
    smt = fake_sysfs(tmp_path / "smt", 16, smt=2)
    assert auto_cores(frozenset(range(16)), smt) == tuple(range(1, 8))
    # Two sockets: the node with most of the cores left (all of the second one's).
    numa = fake_sysfs(tmp_path / "numa", 16, nodes=["0-7", "8-15"])
    assert auto_cores(frozenset(range(16)), numa) == tuple(range(8, 16))
    assert auto_cores(frozenset({0, 1, 2, 9, 10, 11, 12}), numa) == (9, 10, 11, 12)
    # A container's cpuset, no topology readable, one core, two siblings of one core.
    assert auto_cores(frozenset({4, 5, 6}), tmp_path / "none") == (5, 6)
    assert plan_pinning("auto", frozenset({3}), two) == Pinning((3,), 1, "auto")
    assert auto_cores(frozenset({0, 8}), smt) == (8,)


def test_a_listed_core_must_be_one_the_process_may_use(tmp_path: Path) -> None:
    assert plan_pinning("2-3", frozenset(range(4))) == Pinning((2, 3), 2, "listed")
    with pytest.raises(ValueError, match="cores 4-5 are not available to this process"):
        plan_pinning("2-5", frozenset(range(4)))
    off = plan_pinning("off", frozenset(range(4)))
    assert off.cores == ()
    assert off.record() == {"cores": "", "why": "BENCHWATCH_PIN_CORES is off"}


def test_the_governor_is_summarised_over_the_cpus(tmp_path: Path) -> None:
    def governor(name: str, cpus: int, governors: str) -> str:
        return cpu_governor(fake_sysfs(tmp_path / name, cpus, governors=governors) / "cpu")

    assert governor("same", 4, "performance " * 4) == "performance"
    mixed = governor("mixed", 4, "powersave performance performance powersave")
    assert mixed == "mixed: powersave 0,3, performance 1-2"
    assert governor("vm", 2, "") == "unavailable"
    assert cpu_governor(tmp_path / "missing") == "unavailable"


def test_rows_carry_their_noise_and_the_pinning() -> None:
    rows = [
        {"metric": "latency", "samples": [1.0, 1.1, 0.9, 1.0], "extra": {"quantization": "x"}},
        {"metric": "speedup", "samples": [2.0, 2.0, 2.2]},
        {"metric": "peak_memory", "value": 1.0},
    ]
    latency, speedup, memory = annotated(rows, Pinning((1,), 1, "auto"))
    assert latency["extra"] == {
        "quantization": "x",
        "noise": 0.05,
        "cpu_pinning": {"cores": "1", "threads": 1, "how": "auto"},
    }
    assert speedup["extra"] == {"noise": 0.0}
    assert "extra" not in memory


@linux_only
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores to choose from")
def test_pinning_applies_the_chosen_cores_in_a_child() -> None:
    # A child process, as a shard's is: the test's own process keeps its cores. The threads
    # are left out here (torch's import is the shard child's test, in test_shards.py).
    last = max(os.sched_getaffinity(0))
    code = (
        "import dataclasses, os\n"
        "from workers.pinning import apply_pinning, plan_pinning\n"
        f"planned = dataclasses.replace(plan_pinning('{last}'), threads=None)\n"
        "print(apply_pinning(planned).cores, sorted(os.sched_getaffinity(0)))\n"
    )
    child = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert child.stdout.split() == [f"({last},)", f"[{last}]"]
    assert os.sched_getaffinity(0) != {last}


def test_a_machine_worker_with_a_core_it_may_not_use_stops_at_start(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.core.config import settings
    from workers.cli import main

    monkeypatch.setattr(settings, "BROKER_URL", "redis://127.0.0.1:1/0")  # never reached
    monkeypatch.setattr(settings, "PIN_CORES", "8000")
    assert main(["worker", "--machine", "cpu-box"]) == 2
    assert "cores 8000 are not available to this process" in capsys.readouterr().err


def test_run_suite_refuses_a_pinning_it_cannot_apply(capsys: pytest.CaptureFixture[str]) -> None:
    from workers.cli import main

    assert main(["run-suite", "--tier", "test", "--pin", "8000"]) == 2
    assert "--pin=8000: cores 8000 are not available" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        main(["run-suite", "--pin", "1-"])
    assert exited.value.code == 2
    assert "--pin='1-'" in capsys.readouterr().err
