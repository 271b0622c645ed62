"""Confirmation re-runs (issue 15, point 6): the verdict on pooled samples, and the request and
its outcome (a worker's side of a shard is driven through the suite-run
service here; tests/suite_runs/test_rerun_worker.py has real workers measure it)."""

import threading
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.anomalies import confirmation
from app.anomalies.confirmation import ENVIRONMENT_CHANGED, MAX_CASES, judge
from app.anomalies.detectors import DetectorConfig
from app.anomalies.locks import hold_machine_channel
from app.anomalies.models import AlertGroup, Regression
from app.benchmarks.models import Benchmark, CompilerConfig, Metric, Series
from app.core.db import Database
from app.jobs import REQUEUE_SHARDS
from app.runs.ingest import ingest_run
from app.runs.models import Result, Run
from app.runs.schemas import RunIn
from app.suite_runs import pinned
from app.suite_runs import service as suite_runs_service
from app.suite_runs.models import SuiteRun

START = datetime(2026, 3, 1, tzinfo=UTC)
ENVIRONMENT = {"channel": "nightly", "torch": "2.6.0", "torch_git_sha": "abc123", "python": "3.11"}
MACHINE = "rerun-box"


# The verdict, on samples alone.

rng = np.random.default_rng(15)


def noisy(level: float, count: int, spread: float = 0.01) -> list[float]:
    return list(level * (1 + spread * rng.standard_normal(count)))


def test_a_step_the_rerun_shows_again_is_confirmed() -> None:
    verdict = judge(noisy(10.0, 60), noisy(12.0, 3), noisy(12.0, 3), 0.2)
    assert verdict.state == "confirmed"
    assert verdict.p_value <= 0.001
    assert verdict.rel_shift == pytest.approx(0.2, abs=0.02)
    assert "the step holds" in verdict.reason


def test_an_improvement_is_judged_on_its_own_side() -> None:
    assert judge(noisy(10.0, 60), noisy(8.0, 3), noisy(8.0, 3), -0.2).state == "confirmed"
    assert judge(noisy(10.0, 60), noisy(8.0, 3), noisy(12.0, 3), -0.2).state == "withdrawn"


def test_samples_back_at_the_old_level_withdraw_the_step() -> None:
    verdict = judge(noisy(10.0, 60), noisy(12.0, 3), noisy(10.0, 3), 0.2)
    assert verdict.state == "withdrawn"
    assert abs(verdict.rerun_rel_shift) < 0.05
    assert "back at the old level" in verdict.reason


def test_a_transient_is_withdrawn_however_many_samples_the_suspect_point_had() -> None:
    # Pooled, 150 samples at +20% and 150 back at the old level: the pooled test alone
    # would call it a step (p far below 0.001, shift about half way).
    verdict = judge(noisy(10.0, 600), noisy(12.0, 150), noisy(10.0, 150), 0.2)
    assert verdict.p_value < 1e-6
    assert verdict.state == "withdrawn"


def test_a_rerun_on_the_other_side_withdraws_the_step() -> None:
    assert judge(noisy(10.0, 60), noisy(12.0, 3), noisy(9.0, 3), 0.2).state == "withdrawn"


def test_a_rerun_half_way_or_a_step_under_the_minimum_stays_suspected() -> None:
    # Half way back: more than half the suspected change, but the pooled test cannot tell.
    half = judge(list(np.linspace(9.0, 11.0, 20)), [11.0, 11.2], [10.8, 10.9], 0.1)
    assert half.rerun_rel_shift > 0.05
    assert half.state == "suspected"
    assert "still suspected" in half.reason
    strict = DetectorConfig(min_rel_change=0.5, min_rel_floor=0.5)  # 50% whatever the noise
    assert judge(noisy(10.0, 60), noisy(12.0, 3), noisy(12.0, 3), 0.2, strict).state == (
        "suspected"
    )


def test_a_level_of_zero_cannot_be_judged() -> None:
    assert judge([0.0] * 10, [1.0], [1.0], 0.2).state == "suspected"


def test_environment_changes_name_what_differs() -> None:
    suspect = {"torch": "2.6.0", "triton": "3.1.0", "driver": "", "packages": {"a": "1"}}
    here = {"torch": "2.7.0", "triton": "3.1.0", "packages": {"a": "2"}}
    assert pinned.environment_changes(suspect, here) == {"torch": ["2.6.0", "2.7.0"]}
    assert pinned.environment_changes(suspect, suspect) == {}


# The request and its outcome, on each database.


def case(model: str = "softmax", config: str = "eager") -> dict[str, Any]:
    return {
        "suite": "benchwatch-operators",
        "model": model,
        "category": "operator",
        "mode": "inference",
        "precision": "fp32",
        "config": config,
        "batch_size": 64,
    }


def latency_rows(ident: dict[str, Any], samples: Sequence[float]) -> list[dict[str, Any]]:
    return [
        {**ident, "metric": "latency", "unit": "ms", "samples": list(samples)},
        {**ident, "metric": "throughput", "value": 64 / (float(np.median(samples)) / 1000)},
    ]


def ingest(
    session: Session,
    index: int,
    rows: list[dict[str, Any]],
    *,
    source: str = "worker",
    tier: str = "test",
    machine: dict[str, Any] | None = None,
    environment: dict[str, Any] | None = None,
) -> int:
    payload = {
        "key": f"{source}-{tier}-{index}",
        "machine": machine or {"name": MACHINE, "device": "cpu"},
        "environment": environment or ENVIRONMENT,
        "trigger": "schedule",
        "tier": tier,
        "started_at": (START + timedelta(hours=12 * index)).isoformat(),
        "results": rows,
    }
    return ingest_run(session, RunIn.model_validate(payload), source=source).run.id


def history(
    session: Session,
    levels: Sequence[float],
    cases: Sequence[dict[str, Any]] = (case(),),
    **options: Any,
) -> list[int]:
    """One run per level, each case's latency at that level (3 samples, 0.5% noise)."""
    return [
        ingest(
            session,
            i,
            [row for c in cases for row in latency_rows(c, noisy(level, 3, 0.005))],
            **options,
        )
        for i, level in enumerate(levels)
    ]


def series_of(session: Session, model: str = "softmax", metric: str = "latency") -> Series:
    query = (
        select(Series)
        .join(Benchmark, Series.benchmark_id == Benchmark.id)
        .join(Metric, Series.metric_id == Metric.id)
        .join(CompilerConfig, Benchmark.compiler_config_id == CompilerConfig.id)
        .where(Benchmark.model == model, Metric.name == metric, CompilerConfig.name == "eager")
    )
    return session.scalars(query).one()


def suspect(
    session: Session, run_ids: Sequence[int], rel_change: float = 0.3, **series: str
) -> Regression:
    """A suspected step at the last of ``run_ids``, as detection records one."""
    one = series_of(session, **series)
    run = session.get_one(Run, run_ids[-1])
    group = AlertGroup(
        machine_id=run.machine_id,
        channel=run.channel,
        first_bad_run_id=run_ids[-1],
        last_good_run_id=run_ids[-2],
    )
    session.add(group)
    session.flush()
    regression = Regression(
        series_id=one.id,
        group_id=group.id,
        last_good_run_id=run_ids[-2],
        first_bad_run_id=run_ids[-1],
        direction="regression",
        before=10.0,
        after=10.0 * (1 + rel_change),
        before_spread=0.05,
        after_spread=0.05,
        rel_change=rel_change,
        p_value=1.0,
        detector={"name": "change_point", **DetectorConfig().__dict__},
        state="suspected",
    )
    session.add(regression)
    session.flush()
    return regression


class Recorder:
    """A publisher that keeps what it was given (the request's task, after the commit)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def publish(self, name: str, kwargs: dict[str, Any]) -> None:
        if name == REQUEUE_SHARDS:  # not the ingested runs' detections
            self.sent.append((name, kwargs))


@pytest.fixture
def sent(database: Database) -> list[tuple[str, dict[str, Any]]]:
    recorder = Recorder()
    database.set_publisher(recorder)
    return recorder.sent


def reruns(session: Session) -> list[SuiteRun]:
    return list(session.scalars(select(SuiteRun).order_by(SuiteRun.id)))


def test_a_suspect_run_of_a_worker_gets_one_rerun_of_its_cases_once(
    database: Database, sent: list[tuple[str, dict[str, Any]]]
) -> None:
    with database.session_scope() as session:
        runs = history(session, [10.0] * 10 + [13.0], [case(), case("layer_norm")])
        latency, throughput = suspect(session, runs), suspect(session, runs, metric="throughput")
        layer_norm = suspect(session, runs, model="layer_norm")
        confirmation.request_reruns(session, [latency, throughput])
        confirmation.request_reruns(session, [latency])  # a detection retried: nothing more
    assert sent == [(REQUEUE_SHARDS, {"machine": MACHINE})]  # after the commit
    with database.session_scope() as session:
        (rerun,) = reruns(session)
        assert (rerun.key, rerun.trigger, rerun.tier, rerun.machine) == (
            f"confirm-{runs[-1]}-1",
            "confirm",
            "test",
            MACHINE,
        )
        assert [(s.label, s.cases, s.status) for s in rerun.shards] == [
            ("softmax inference", [case()], "pending")  # two metrics, one case
        ]
        request = rerun.description["confirm"]
        assert request["run_id"] == runs[-1]
        assert request["regression_ids"] == [latency.id, throughput.id]
        assert request["environment"]["torch_git_sha"] == "abc123"
        stored = session.get_one(Regression, latency.id)
        assert stored.confirmation["rerun"]["status"] == "requested"
        assert stored.confirmation["rerun"]["suite_run_id"] == rerun.id
        assert stored.state == "suspected"
        # A later detection suspects another case of the same run: the same request grows.
        confirmation.request_reruns(session, [session.get_one(Regression, layer_norm.id)])
    with database.session_scope() as session:
        (rerun,) = reruns(session)
        assert [s.label for s in rerun.shards] == ["softmax inference", "layer_norm inference"]
        assert rerun.description["confirm"]["regression_ids"][-1] == layer_norm.id
    assert len(sent) == 2


def test_a_series_not_made_by_a_worker_is_not_rerun(
    database: Database, sent: list[tuple[str, dict[str, Any]]]
) -> None:
    with database.session_scope() as session:
        uploaded = suspect(session, history(session, [10.0] * 6 + [13.0], source="ci"))
        untiered = suspect(
            session,
            history(session, [10.0] * 6 + [13.0], [case("matmul")], tier=""),
            model="matmul",
        )
        confirmation.request_reruns(session, [uploaded, untiered])
        assert reruns(session) == []
        assert uploaded.confirmation == untiered.confirmation == {}
    assert sent == []


def test_a_run_with_many_suspected_cases_reruns_the_largest_steps(database: Database) -> None:
    models = [f"op{i}" for i in range(MAX_CASES + 2)]
    with database.session_scope() as session:
        runs = history(session, [10.0] * 6 + [13.0], [case(m) for m in models])
        found = [suspect(session, runs, 0.1 + i / 100, model=m) for i, m in enumerate(models)]
        confirmation.request_reruns(session, found)
        (rerun,) = reruns(session)
        assert len(rerun.shards) == MAX_CASES
        skipped = [r for r in found if r.confirmation["rerun"]["status"] == "not_run"]
        assert skipped == found[:2]  # the two smallest steps
        assert "more than 8 suspected cases" in skipped[0].confirmation["rerun"]["verdict"]
        confirmation.request_reruns(session, found)  # asked again: still once
        assert len(reruns(session)) == 1


def requested(database: Database, levels: Sequence[float]) -> tuple[int, int, list[int]]:
    """A suspected step at the last level, its re-run requested: (regression, shard, runs)."""
    with database.session_scope() as session:
        runs = history(session, levels)
        regression = suspect(session, runs, levels[-1] / levels[0] - 1)
        confirmation.request_reruns(session, [regression])
        (rerun,) = reruns(session)
        return regression.id, rerun.shards[0].id, runs


def measure_again(
    database: Database, shard_id: int, samples: Sequence[float] | None, reason: str = ""
) -> None:
    """What a worker does with a shard: claim it, record its rows (None: it failed), close."""
    with database.session_scope() as session:
        claim = suite_runs_service.claim_shard(session, shard_id, "w1", 60)
        rows = latency_rows(case(), samples) if samples is not None else None
        suite_runs_service.finish_shard(session, shard_id, claim.lease, rows, reason)
        suite_run_id = claim.shard.suite_run_id
    with database.session_scope() as session:
        assert suite_runs_service.finalize(session, suite_run_id) is None  # never ingested
        confirmation.finish_rerun(session, suite_run_id)


def test_the_rerun_is_pooled_into_the_suspect_point_and_confirms_the_step(
    database: Database,
) -> None:
    regression_id, shard_id, runs = requested(database, [10.0] * 10 + [13.0])
    with database.session_scope() as session:
        series_id = session.get_one(Regression, regression_id).series_id
        measured = session.get_one(Result, (runs[-1], series_id))
        original, value = list(measured.samples or []), measured.value
    measure_again(database, shard_id, [13.0, 13.1, 12.9])
    measure_again(database, shard_id, [13.0, 13.1, 12.9])  # a redelivered finish: nothing more
    with database.session_scope() as session:
        regression = session.get_one(Regression, regression_id)
        assert regression.state == "confirmed"
        rerun = regression.confirmation["rerun"]
        assert rerun["status"] == "done"
        assert rerun["verdict"].startswith(f"re-run on {MACHINE}: confirmed; the step holds")
        assert (rerun["samples_before"], rerun["samples_original"], rerun["samples_added"]) == (
            30,
            3,
            3,
        )
        assert rerun["p_value"] <= 0.001
        assert rerun["rel_shift"] == pytest.approx(0.3, abs=0.03)
        assert rerun["finished_at"] >= rerun["requested_at"]
        result = session.get_one(Result, (runs[-1], series_id))
        assert result.samples == [*original, 13.0, 13.1, 12.9]
        assert result.value == value  # the history stays as measured
        assert (result.extra or {})["rerun"]["samples_added"] == 3
        (suite_run,) = reruns(session)
        assert (suite_run.status, suite_run.run_id) == ("finished", None)
        assert session.scalar(select(func.count()).select_from(Run)) == len(runs)


def test_a_rerun_back_at_the_old_level_withdraws_the_step(database: Database) -> None:
    regression_id, shard_id, _ = requested(database, [10.0] * 10 + [13.0])
    measure_again(database, shard_id, [10.0, 10.02, 9.98])
    with database.session_scope() as session:
        regression = session.get_one(Regression, regression_id)
        assert regression.state == "withdrawn"
        assert "back at the old level" in regression.confirmation["rerun"]["verdict"]


def test_a_rerun_that_fails_leaves_the_step_suspected_with_the_reason(database: Database) -> None:
    regression_id, shard_id, _ = requested(database, [10.0] * 10 + [13.0])
    why = "failed 3 times; last: the shard did not finish within 3600 s and was killed"
    measure_again(database, shard_id, None, why)
    with database.session_scope() as session:
        regression = session.get_one(Regression, regression_id)
        assert regression.state == "suspected"
        rerun = regression.confirmation["rerun"]
        assert (rerun["status"], rerun["verdict"]) == ("failed", f"re-run failed: {why}")
        (suite_run,) = reruns(session)
        assert (suite_run.status, suite_run.reason) == ("failed", "no case was measured again")


def test_a_changed_environment_closes_the_rerun_unmeasured(database: Database) -> None:
    regression_id, _, _ = requested(database, [10.0] * 10 + [13.0])
    with database.session_scope() as session:
        (suite_run,) = reruns(session)
        suspect_stack = confirmation.suspect_environment(suite_run)
        assert suspect_stack is not None
        changes = pinned.environment_changes(suspect_stack, {**ENVIRONMENT, "torch": "2.7"})
        confirmation.skip_rerun(session, suite_run.id, changes)
    with database.session_scope() as session:
        (suite_run,) = reruns(session)
        assert suite_run.status == "failed"
        assert suite_run.reason == f"{ENVIRONMENT_CHANGED} (torch 2.6.0 -> 2.7)"
        assert {s.status for s in suite_run.shards} == {"failed"}
        regression = session.get_one(Regression, regression_id)
        assert regression.state == "suspected"
        rerun = regression.confirmation["rerun"]
        assert rerun["verdict"] == ENVIRONMENT_CHANGED
        assert rerun["environment_changes"] == {"torch": ["2.6.0", "2.7"]}
        assert confirmation.finish_rerun(session, suite_run.id) is None


@pytest.mark.both_dialects
def test_a_verdict_waits_for_the_detection_of_its_machine_and_keeps_what_it_wrote(
    postgres_database: Database,
) -> None:
    database = postgres_database
    regression_id, shard_id, runs = requested(database, [10.0] * 10 + [13.0])
    with database.session_scope() as session:
        claim = suite_runs_service.claim_shard(session, shard_id, "w1", 60)
        rows = latency_rows(case(), [13.0, 13.1, 12.9])
        suite_runs_service.finish_shard(session, shard_id, claim.lease, rows, "")
        suite_run_id = claim.shard.suite_run_id
    judged = threading.Event()

    def finish() -> None:
        with database.session_scope() as session:
            confirmation.finish_rerun(session, suite_run_id)
        judged.set()

    with database.sessionmaker() as detection:
        hold_machine_channel(detection, detection.get_one(Run, runs[-1]))
        worker = threading.Thread(target=finish)
        worker.start()
        assert not judged.wait(1.0)  # detection of that machine and channel is running
        regression = detection.get_one(Regression, regression_id)
        regression.state = "withdrawn"  # what detection decided meanwhile
        regression.confirmation = {**regression.confirmation, "withdrawn": {"why": "test"}}
        detection.commit()
    worker.join(30)
    assert judged.is_set()
    with database.session_scope() as session:
        regression = session.get_one(Regression, regression_id)
        assert regression.state == "withdrawn"  # detection's word stands
        assert set(regression.confirmation) == {"withdrawn", "rerun"}
        assert regression.confirmation["rerun"]["state"] == "confirmed"  # the re-run's, beside
