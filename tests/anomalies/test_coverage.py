"""Coverage changes: cases removed from or added to a machine's runs are low-severity findings."""

from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select

from app.anomalies import service
from app.anomalies.models import AlertGroup, CaseFailure
from app.core.db import Database
from tests.anomalies.test_failures import MODELS, case, failures
from tests.factories import result, run_payload
from tests.posting import post_detected


def post(
    client: TestClient,
    headers: dict[str, str],
    index: int,
    models: tuple[str, ...] = MODELS,
    *,
    tier: str = "",
    outcomes: dict[str, str] | None = None,
    extra: list[dict[str, Any]] | None = None,
) -> int:
    """The ``index``-th nightly of h100-8, with these models (torchbench) and rows."""
    rows = [row for model in models for row in case(model, (outcomes or {}).get(model, "pass"))]
    payload = run_payload(f"n-{index}", rows + (extra or []), index=index, tier=tier)
    return post_detected(client, headers, payload)


def described(database: Database) -> list[tuple[str, str, int, int, int | None, str]]:
    """Each finding: model, failure, last passing, first failing and passing again runs, reason."""
    return [
        (
            f.benchmark.model,
            f.failure,
            f.last_passing_run_id,
            f.first_failing_run_id,
            f.passing_again_run_id,
            f.reason,
        )
        for f in failures(database)
    ]


def test_a_removed_model_opens_a_finding_that_ends_when_it_returns(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    runs = [post(client, ingest_headers, i) for i in range(3)]
    without_t5 = tuple(m for m in MODELS if m != "t5")
    runs.append(post(client, ingest_headers, 3, without_t5))
    runs.append(post(client, ingest_headers, 4, without_t5))  # still gone: nothing new
    assert described(database) == [
        ("t5", "removed", runs[2], runs[3], None, "no longer reported"),
    ]
    (finding,) = failures(database)
    assert finding.severity == "low"
    with database.session_scope() as session:
        (group,) = session.scalars(select(AlertGroup)).all()
        assert (group.first_bad_run_id, group.last_good_run_id) == (runs[3], runs[2])

    runs.append(post(client, ingest_headers, 5))
    assert described(database) == [
        ("t5", "removed", runs[2], runs[3], runs[5], "no longer reported"),
    ]


def test_a_new_model_opens_an_added_finding_and_can_then_fail(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    runs = [post(client, ingest_headers, 0)]  # a first run adds nothing
    assert failures(database) == []
    runs.append(post(client, ingest_headers, 1, (*MODELS, "vit")))
    assert described(database) == [("vit", "added", runs[0], runs[1], None, "newly reported")]
    # reported again: no longer new; failing now is a failure of its own, of high severity
    runs.append(post(client, ingest_headers, 2, (*MODELS, "vit"), outcomes={"vit": "oom"}))
    assert described(database) == [
        ("vit", "added", runs[0], runs[1], runs[2], "newly reported"),
        ("vit", "failed", runs[1], runs[2], None, "CUDA out of memory"),
    ]
    assert [f.severity for f in failures(database)] == ["low", "high"]


def test_partial_runs_remove_nothing(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    post(client, ingest_headers, 0, tier="full")
    post(client, ingest_headers, 1, tier="full")
    post(client, ingest_headers, 2, ("bert",), tier="smoke")  # a smoke run after a full one
    smoke = post(client, ingest_headers, 3, ("bert", "t5"), tier="smoke")
    post(client, ingest_headers, 4, tier="full")
    operators = [result(model="matmul", suite="benchwatch-operators", config="eager")]
    post(client, ingest_headers, 5, (), tier="full", extra=operators)  # another suite only
    post(client, ingest_headers, 6, tier="full", extra=operators)
    assert failures(database) == []
    # within the tier, a smoke run that loses a model tells it
    later_smoke = post(client, ingest_headers, 7, ("bert",), tier="smoke")
    assert described(database) == [
        ("t5", "removed", smoke, later_smoke, None, "no longer reported"),
    ]


def test_many_models_at_once_make_one_finding_per_suite(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    many = tuple(f"model_{i:02d}" for i in range(12))
    runs = [post(client, ingest_headers, 0, many), post(client, ingest_headers, 1, many)]
    runs.append(post(client, ingest_headers, 2, many[:4]))  # the suite crashed after 4
    assert described(database) == [
        (
            "model_04",
            "removed",
            runs[1],
            runs[2],
            None,
            "8 models of torchbench no longer reported (8 cases):"
            " model_04, model_05, model_06, model_07, model_08 and 3 more",
        ),
    ]
    runs.append(post(client, ingest_headers, 3, many))  # back: the finding ends
    assert [f.passing_again_run_id for f in failures(database)] == [runs[3]]


def test_detection_again_and_a_rescan_add_nothing_and_a_rescan_finds_them_again(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    without_bert = tuple(m for m in MODELS if m != "bert")
    runs = [post(client, ingest_headers, i) for i in range(3)]
    runs.append(post(client, ingest_headers, 3, (*without_bert, "vit")))
    runs.append(post(client, ingest_headers, 4, (*without_bert, "vit")))
    runs.append(post(client, ingest_headers, 5, (*MODELS, "vit")))
    found = described(database)
    assert [(model, failure) for model, failure, *_ in found] == [
        ("bert", "removed"),
        ("vit", "added"),
    ]
    with database.session_scope() as session:
        for run_id in runs:
            again = service.detect_for_run(session, run_id)
            assert (again.failures, again.passing_again) == ([], [])
    with database.session_scope() as session:
        assert service.rescan(session).failures == []
    assert described(database) == found

    with database.session_scope() as session:
        for failure in session.scalars(select(CaseFailure)):
            session.delete(failure)
    with database.session_scope() as session:
        assert len(service.rescan(session).failures) == 2
    assert described(database) == found
