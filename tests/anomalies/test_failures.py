"""Failure findings: cases that start failing open them, grouped per nightly; passing ends them."""

from datetime import datetime, timedelta
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select

from app.anomalies import service
from app.anomalies.models import AlertGroup, CaseFailure
from app.core.db import Database
from app.runs.models import Run
from tests.factories import result, run_payload
from tests.posting import post_detected

MODELS = ("alexnet", "bert", "resnet50", "t5", "yolov3")


def case(model: str, outcome: str) -> list[dict[str, Any]]:
    """A case's results: ``pass``, ``oom`` (latency failed), ``accuracy`` (fail_accuracy)."""
    latency = result(model=model, value=10.0, samples=[9.9, 10.0, 10.1])
    accuracy = result(model=model, metric="accuracy", value=None, text_value="pass")
    if outcome == "oom":
        latency = result(model=model, value=None, status="failed", reason="CUDA out of memory")
    if outcome == "accuracy":
        accuracy["text_value"] = "fail_accuracy"
    return [latency, accuracy]


def nightly(
    client: TestClient,
    headers: dict[str, str],
    index: int,
    outcomes: dict[str, str],
    start: datetime | None = None,
) -> int:
    """The ``index``-th nightly (12-hourly from ``start``, default January 2026)."""
    rows = [row for model in MODELS for row in case(model, outcomes.get(model, "pass"))]
    payload = run_payload(f"n-{index}", rows, index=index)
    if start is not None:
        payload["started_at"] = (start + timedelta(hours=12 * index)).isoformat()
    return post_detected(client, headers, payload)


def failures(database: Database) -> list[CaseFailure]:
    """By model, then id."""
    with database.session_scope() as session:
        found = session.scalars(select(CaseFailure).order_by(CaseFailure.id))
        return sorted(found, key=lambda f: f.benchmark.model)


def test_three_models_start_failing_in_one_group_and_end_when_they_pass(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    runs = [nightly(client, ingest_headers, i, {}) for i in range(4)]
    breaking = {"alexnet": "oom", "bert": "accuracy", "t5": "oom"}
    runs.append(nightly(client, ingest_headers, 4, breaking))
    runs.append(nightly(client, ingest_headers, 5, breaking))  # still failing: nothing new
    found = failures(database)
    assert [(f.benchmark.model, f.failure) for f in found] == [
        ("alexnet", "failed"),
        ("bert", "accuracy"),
        ("t5", "failed"),
    ]
    assert {f.first_failing_run_id for f in found} == {runs[4]}
    assert {f.last_passing_run_id for f in found} == {runs[3]}
    assert found[0].reason == "CUDA out of memory"
    assert found[1].reason == "accuracy: fail_accuracy"
    assert len({f.group_id for f in found}) == 1
    with database.session_scope() as session:
        (group,) = session.scalars(select(AlertGroup)).all()
        assert group.first_bad_run_id == runs[4]
        assert sorted(f.id for f in group.failures) == sorted(f.id for f in found)

    runs.append(nightly(client, ingest_headers, 6, {}))
    assert [f.passing_again_run_id for f in failures(database)] == [runs[6]] * 3


def test_a_flaky_case_is_told_once_as_flaky(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    pattern = ["pass", "pass", "pass", "oom", "pass", "oom", "pass", "oom", "pass", "oom"]
    for index, outcome in enumerate(pattern):
        nightly(client, ingest_headers, index, {"yolov3": outcome})
    found = failures(database)
    assert [f.flaky for f in found] == [False, True]  # its first failure, then once as flaky


def test_a_flaky_case_that_fails_for_good_is_told_again(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    pattern = ["pass", "pass", "pass", "oom", "pass", "oom", "pass", "oom", "pass"]
    pattern += ["oom"] * 6
    for index, outcome in enumerate(pattern):
        nightly(client, ingest_headers, index, {"yolov3": outcome})
    found = failures(database)
    assert [f.flaky for f in found] == [False, True, False]  # first, flaky, for good
    steady = found[2]
    with database.session_scope() as session:
        first_failing = session.get_one(Run, steady.first_failing_run_id)
        assert first_failing.key == "n-13"  # the fifth failing run in a row (9 to 13)


def test_a_case_never_seen_passing_opens_nothing(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    nightly(client, ingest_headers, 0, {"bert": "oom"})
    nightly(client, ingest_headers, 1, {"bert": "oom"})
    assert failures(database) == []


def test_a_rescan_finds_the_same_failures_and_twice_adds_nothing(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    pattern = [{}, {}, {}, {"bert": "oom"}, {"bert": "oom"}, {}, {"t5": "accuracy"}]
    for index, outcomes in enumerate(pattern):
        nightly(client, ingest_headers, index, outcomes)
    found = [
        (f.benchmark.model, f.first_failing_run_id, f.passing_again_run_id)
        for f in failures(database)
    ]
    assert [model for model, _, _ in found] == ["bert", "t5"]
    with database.session_scope() as session:
        for failure in session.scalars(select(CaseFailure)):
            session.delete(failure)
    with database.session_scope() as session:
        rescanned = service.rescan(session)
        assert len(rescanned.failures) == 2
    again = [
        (f.benchmark.model, f.first_failing_run_id, f.passing_again_run_id)
        for f in failures(database)
    ]
    assert again == found
    with database.session_scope() as session:
        assert service.rescan(session).failures == []


def test_the_overview_lists_the_newly_failing_cases(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    for index in range(3):
        nightly(client, ingest_headers, index, {})
    reason = "<b>CUDA</b> out of memory"
    nightly(client, ingest_headers, 3, {"t5": "oom"})
    with database.session_scope() as session:
        (failure,) = session.scalars(select(CaseFailure)).all()
        failure.reason = reason  # as an upload could say it
    page = client.get("/", params={"machine": "h100-8"}).text
    assert "Newly failing" in page
    assert "1 case that passed before" in page
    assert f'href="/alerts?group={failure.group_id}">t5</a>' in page
    assert "&lt;b&gt;CUDA&lt;/b&gt; out of memory" in page
