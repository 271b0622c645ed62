"""Aggregate findings after each nightly: pass rate, geomean speedup; grouped, explained, ended."""

from typing import Any

import numpy as np
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.anomalies import service
from app.anomalies.models import AggregateFinding, AggregatePoint, CaseFailure, Regression
from app.core.db import Database
from tests.factories import result, run_payload
from tests.posting import post_detected

MODELS = tuple(f"model_{i}" for i in range(10))
SPEEDUP = 1.5


def case(model: str, outcome: str, speedup: float) -> list[dict[str, Any]]:
    """A model's dashboard results: ``pass``, ``oom`` (its speedup failed), ``accuracy``."""
    rows = [
        result(model=model, metric="speedup", value=speedup),
        result(model=model, metric="accuracy", value=None, text_value="pass"),
        result(model=model, metric="compilation_latency", value=40.0),
        result(model=model, metric="compression_ratio", value=1.2),
    ]
    if outcome == "oom":
        rows[0] = result(
            model=model, metric="speedup", value=None, status="failed", reason="CUDA out of memory"
        )
    if outcome == "accuracy":
        rows[1]["text_value"] = "fail_accuracy"
    return rows


def nightly(
    client: TestClient,
    headers: dict[str, str],
    index: int,
    outcomes: dict[str, str] | None = None,
    factors: dict[str, float] | None = None,
) -> int:
    """The ``index``-th nightly: every model passes at ``SPEEDUP`` (x 0.2% noise) unless told."""
    noise = np.random.default_rng(index).uniform(-0.002, 0.002, len(MODELS))
    rows = [
        row
        for model, jitter in zip(MODELS, noise, strict=True)
        for row in case(
            model,
            (outcomes or {}).get(model, "pass"),
            round(SPEEDUP * (factors or {}).get(model, 1.0) * (1 + jitter), 5),
        )
    ]
    return post_detected(client, headers, run_payload(f"n-{index}", rows, index=index))


def findings(database: Database) -> list[AggregateFinding]:
    with database.session_scope() as session:
        return list(session.scalars(select(AggregateFinding).order_by(AggregateFinding.id)))


def test_models_that_start_failing_drop_the_pass_rate_in_their_failures_group(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    runs = [nightly(client, ingest_headers, i) for i in range(4)]
    breaking = {"model_1": "oom", "model_4": "accuracy", "model_7": "oom"}
    runs.append(nightly(client, ingest_headers, 4, breaking))
    runs.append(nightly(client, ingest_headers, 5, breaking))  # still failing: nothing new
    (found,) = findings(database)
    assert (found.stat, found.rule) == ("pass_rate", "pass_rate_below")
    assert (found.suite, found.config, found.precision, found.mode) == (
        "torchbench",
        "cudagraphs",
        "bf16",
        "inference",
    )
    assert (found.before, found.after) == (1.0, 0.7)
    assert (found.last_good_run_id, found.first_bad_run_id) == (runs[3], runs[4])
    assert found.resolved_run_id is None
    with database.session_scope() as session:
        failing = session.scalars(select(CaseFailure).order_by(CaseFailure.id)).all()
        assert len(failing) == 3
        assert {f.group_id for f in failing} == {found.group_id}
        assert found.explained_by == {"regressions": [], "failures": [f.id for f in failing]}
        point = session.scalars(
            select(AggregatePoint).where(
                AggregatePoint.run_id == runs[4], AggregatePoint.stat == "pass_rate"
            )
        ).one()
        assert (point.value, point.model_count) == (0.7, 10)

    runs.append(nightly(client, ingest_headers, 6))
    assert [f.resolved_run_id for f in findings(database)] == [runs[6]]


def test_a_geomean_speedup_step_is_found_on_the_aggregate_and_explained(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    # Three models of ten lose 12%: the geomean drops 3.8%, under the dashboard's 5%.
    slower = {"model_2": 0.88, "model_5": 0.88, "model_8": 0.88}
    runs = [nightly(client, ingest_headers, i) for i in range(12)]
    runs += [nightly(client, ingest_headers, i, factors=slower) for i in range(12, 18)]
    (found,) = findings(database)
    assert (found.stat, found.rule) == ("geomean_speedup", "step")
    assert (found.last_good_run_id, found.first_bad_run_id) == (runs[11], runs[12])
    assert -0.045 < found.rel_change < -0.03
    assert found.resolved_run_id is None
    with database.session_scope() as session:
        regressions = session.scalars(select(Regression).order_by(Regression.id)).all()
        slowed = [r.id for r in regressions if r.series.benchmark.model in slower]
        assert len(slowed) == 3
        assert found.explained_by == {"regressions": slowed, "failures": []}
        assert {r.group_id for r in regressions} == {found.group_id}

    runs.append(nightly(client, ingest_headers, 18))  # back to the level before
    assert [f.resolved_run_id for f in findings(database)] == [runs[18]]


def test_a_speedup_below_base_opens_at_once_and_the_step_after_it_adds_nothing(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    everyone = dict.fromkeys(MODELS, 0.9)
    runs = [nightly(client, ingest_headers, i) for i in range(10)]
    runs.append(nightly(client, ingest_headers, 10, factors=everyone))
    (found,) = findings(database)
    assert (found.stat, found.rule, found.first_bad_run_id) == (
        "geomean_speedup",
        "speedup_below_base",
        runs[10],
    )
    assert found.after / found.before < 0.95
    runs += [nightly(client, ingest_headers, i, factors=everyone) for i in range(11, 17)]
    assert [f.rule for f in findings(database)] == ["speedup_below_base"]  # the step: known

    with database.session_scope() as session:  # detected again: nothing new, no point twice
        points = session.scalar(select(func.count(AggregatePoint.id)))
        service.detect_for_run(session, runs[10])
        service.detect_for_run(session, runs[16])
    with database.session_scope() as session:
        assert session.scalar(select(func.count(AggregatePoint.id))) == points
    assert len(findings(database)) == 1

    runs.append(nightly(client, ingest_headers, 17))
    assert [f.resolved_run_id for f in findings(database)] == [runs[17]]


def test_a_rescan_finds_the_same_findings_and_twice_adds_nothing(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    breaking = {"model_1": "oom", "model_4": "oom"}
    for i in range(3):
        nightly(client, ingest_headers, i)
    nightly(client, ingest_headers, 3, breaking)
    nightly(client, ingest_headers, 4)
    nightly(client, ingest_headers, 5, factors=dict.fromkeys(MODELS, 0.8))
    before = [
        (f.stat, f.rule, f.first_bad_run_id, f.resolved_run_id, f.explained_by)
        for f in findings(database)
    ]
    assert [rule for _, rule, _, _, _ in before] == ["pass_rate_below", "speedup_below_base"]
    with database.session_scope() as session:
        for finding in session.scalars(select(AggregateFinding)):
            session.delete(finding)
        for point in session.scalars(select(AggregatePoint)):
            session.delete(point)
    with database.session_scope() as session:
        service.rescan(session)
    again = [
        (f.stat, f.rule, f.first_bad_run_id, f.resolved_run_id, f.explained_by)
        for f in findings(database)
    ]
    assert again == before
    with database.session_scope() as session:
        service.rescan(session)
    assert len(findings(database)) == 2
