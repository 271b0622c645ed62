"""Shards: planned per case and mode, run in a child process that may crash, hang or be lost."""

from pathlib import Path

import pytest

from app.core.config import settings
from workers.pinning import plan_pinning
from workers.shard_runner import run_shard_process
from workers.tiers import TIERS, measurements_of, plan_shards, tier_measurements


def test_a_tier_is_cut_into_one_shard_per_case_and_mode() -> None:
    shards = plan_shards("test")
    labels = [shard.label for shard in shards]
    assert "resnet inference" in labels
    assert "resnet training" in labels
    assert "all_reduce inference" in labels
    assert len(labels) == len(set(labels))
    assert sum(len(shard.cases) for shard in shards) == len(tier_measurements(TIERS["test"]))
    smoke = {shard.label: shard for shard in plan_shards("smoke", ["softmax"])}
    assert list(smoke) == ["softmax inference"]
    configs = {case["config"] for case in smoke["softmax inference"].cases}
    assert configs == {"eager", "default", "dynamic", "cudagraphs", "max_autotune"}


def test_the_child_finds_the_measurements_its_cases_name() -> None:
    inference, training = plan_shards("smoke", ["bert"])
    measurements = measurements_of("smoke", inference.cases + training.cases)
    assert {m.case.model for m in measurements} == {"bert"}
    assert {m.mode for m in measurements} == {"inference", "training"}
    assert len(measurements) == len(inference.cases) + len(training.cases)


def spec(models: list[str]) -> dict[str, object]:
    cases = [case for shard in plan_shards("test", models) for case in shard.cases]
    return {"tier": "test", "cases": cases}


def test_a_shard_runs_in_a_child_and_returns_its_rows() -> None:
    beats: list[int] = []
    outcome = run_shard_process(
        spec(["layer_norm"]),
        timeout_s=120,
        heartbeat=lambda: beats.append(1) is None,
        every_s=0.2,
    )
    assert outcome.rows is not None, outcome.reason
    metrics = {row["metric"] for row in outcome.rows}
    assert {"latency", "throughput", "accuracy", "peak_memory", "kernel_count"} <= metrics
    assert beats  # the lease was renewed while the child ran
    # The child pinned itself as BENCHWATCH_PIN_CORES says (its record is what
    # os.sched_getaffinity said there afterwards), and gave each timing its within-run noise.
    (latency,) = [row for row in outcome.rows if row["metric"] == "latency"]
    assert latency["extra"]["cpu_pinning"] == plan_pinning(settings.PIN_CORES).record()
    assert latency["extra"]["noise"] >= 0


def test_a_crashing_child_fails_the_shard_with_its_error() -> None:
    outcome = run_shard_process(
        {"tier": "test", "cases": [{"suite": "nope", "model": "missing"}]},
        timeout_s=120,
        heartbeat=lambda: True,
        every_s=0.5,
    )
    assert outcome.rows is None
    assert "exited with status 1" in outcome.reason
    assert "KeyError" in outcome.reason  # the tail of the child's stderr


def test_a_hanging_child_is_killed_at_the_timeout() -> None:
    outcome = run_shard_process(spec(["resnet"]), timeout_s=1, heartbeat=lambda: True, every_s=0.2)
    assert outcome.rows is None
    assert "did not finish within 1 s" in outcome.reason


def test_a_lost_lease_stops_the_attempt() -> None:
    outcome = run_shard_process(
        spec(["resnet"]), timeout_s=60, heartbeat=lambda: False, every_s=0.2
    )
    assert outcome.rows is None
    assert "lease was lost" in outcome.reason


def test_a_child_killed_by_a_signal_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A child that dies of SIGKILL, as one the kernel's OOM killer picked would.
    suicide = tmp_path / "python"
    suicide.write_text("#!/bin/sh\nkill -KILL $$\n")
    suicide.chmod(0o755)
    monkeypatch.setattr("workers.shard_runner.sys.executable", str(suicide))
    outcome = run_shard_process(
        {"tier": "test", "cases": []}, timeout_s=30, heartbeat=lambda: True, every_s=0.2
    )
    assert outcome.rows is None
    assert "killed by SIGKILL (out of memory?)" in outcome.reason


def test_a_shard_child_inherits_no_worker_secret(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A child that prints the environment it was given, then fails so that it reaches the
    # reason: the worker's database URL and pepper must not be there, its cores setting must.
    monkeypatch.setenv("BENCHWATCH_DATABASE_URL", "postgresql://bw:hunter2@db/benchwatch")
    monkeypatch.setenv("BENCHWATCH_TOKEN_PEPPER", "pepper-not-for-children")
    monkeypatch.setenv("BENCHWATCH_PIN_CORES", "0")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    dump = tmp_path / "python"
    dump.write_text("#!/bin/sh\nenv >&2\nexit 1\n")
    dump.chmod(0o755)
    monkeypatch.setattr("workers.shard_runner.sys.executable", str(dump))
    outcome = run_shard_process(
        {"tier": "test", "cases": []}, timeout_s=30, heartbeat=lambda: True, every_s=0.2
    )
    assert outcome.rows is None
    assert "hunter2" not in outcome.reason
    assert "pepper-not-for-children" not in outcome.reason
    assert "BENCHWATCH_PIN_CORES=0" in outcome.reason
    assert "CUDA_VISIBLE_DEVICES=0" in outcome.reason
