"""Projects sharing a machine and channel: failures, coverage and aggregates judged apart."""

from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select

from app.anomalies import service as detection
from app.anomalies.models import AggregateFinding, AlertGroup, CaseFailure
from app.core.db import Database
from app.corrections import service as corrections
from app.notifications import service as notifications
from app.notifications.models import Subscription
from app.runs.models import Run
from tests.factories import result, run_payload
from tests.posting import post_detected

# Each project's own models in one suite; speech's t5 and gpt2 never pass (they fail nowhere
# new), so speech's pass rate is 50% where vision's is 100%.
MODELS = {"vision": ("alexnet", "resnet50", "vgg16", "yolov3"), "speech": ("bert", "gpt2", "t5")}
ALWAYS = {"t5": "accuracy", "gpt2": "accuracy"}


def case(model: str, outcome: str) -> list[dict[str, Any]]:
    """A model's dashboard results: ``pass``, ``oom`` (its speedup failed), ``accuracy``."""
    speedup = result(model=model, metric="speedup", value=1.5)
    accuracy = result(model=model, metric="accuracy", value=None, text_value="pass")
    if outcome == "oom":
        speedup = result(model=model, metric="speedup", value=None, status="failed", reason="OOM")
    if outcome == "accuracy":
        accuracy["text_value"] = "fail_accuracy"
    return [speedup, accuracy]


def post(
    client: TestClient, headers: dict[str, str], project: str, index: int, broken: dict[str, str]
) -> int:
    """A run of ``project``'s models, ``index`` 12-hour steps in; detection runs in process."""
    outcomes = {**ALWAYS, **broken}
    rows = [row for model in MODELS[project] for row in case(model, outcomes.get(model, "pass"))]
    payload = run_payload(f"n-{index}", rows, index=index, project=project)
    return post_detected(client, headers, payload)


def findings(database: Database) -> list[tuple[str, str, str, int]]:
    """Each failure and coverage finding: model, kind, first failing run's project and id."""
    with database.session_scope() as session:
        query = (
            select(CaseFailure, Run.project)
            .join(Run, CaseFailure.first_failing_run_id == Run.id)
            .order_by(CaseFailure.id)
        )
        found = [
            (f.benchmark.model, f.failure, project, f.first_failing_run_id)
            for f, project in session.execute(query).unique()
        ]
        return sorted(found, key=lambda f: (f[3], f[0]))


def subscription(name: str, match: dict[str, Any]) -> Subscription:
    return Subscription(name=name, match=match, exclude=[], receivers=[], paused=False)


def test_two_projects_on_one_machine_are_judged_apart_and_told_apart(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    # Alternating runs with different models: judged together, each run would lose the
    # other's models (removed), gain its own (added) and halve or double the pass rate.
    runs: dict[str, list[int]] = {"vision": [], "speech": []}
    for index in range(8):
        project = ("vision", "speech")[index % 2]
        runs[project].append(post(client, ingest_headers, project, index, {}))
    assert findings(database) == []
    with database.session_scope() as session:
        assert session.scalars(select(AggregateFinding)).all() == []

    broken = {"alexnet": "accuracy", "resnet50": "accuracy"}  # its pass rate halves
    broken_vision = post(client, ingest_headers, "vision", 8, broken)
    broken_speech = post(client, ingest_headers, "speech", 9, {"bert": "oom"})
    found = findings(database)
    assert found == [
        ("alexnet", "accuracy", "vision", broken_vision),
        ("resnet50", "accuracy", "vision", broken_vision),
        ("bert", "failed", "speech", broken_speech),
    ]
    with database.session_scope() as session:
        failures = sorted(
            session.scalars(select(CaseFailure)).unique(),
            key=lambda f: (f.first_failing_run_id, f.benchmark.model),
        )
        # Each compared with its own project's last run, not the other project's in between.
        last_passing = [f.last_passing_run_id for f in failures]
        assert last_passing == [runs["vision"][-1]] * 2 + [runs["speech"][-1]]
        assert failures[0].group_id != failures[2].group_id  # a group is one project's
        # Vision's pass rate fell against vision's last run (not against speech's 50%).
        (aggregate,) = session.scalars(select(AggregateFinding)).unique().all()
        assert (aggregate.stat, aggregate.rule) == ("pass_rate", "pass_rate_below")
        assert (aggregate.first_bad_run_id, aggregate.before) == (broken_vision, 1.0)
        assert aggregate.last_good_run_id == runs["vision"][-1]
        assert aggregate.group_id == failures[0].group_id
        assert aggregate.explained_by["failures"] == sorted([failures[0].id, failures[1].id])

        # The subscription rule `project` selects a project's findings and no other's.
        groups = session.scalars(select(AlertGroup).order_by(AlertGroup.id)).unique().all()
        vision = subscription("vision", {"project": "vision"})
        speech = subscription("speech", {"project": ["spee*"], "kind": "failure"})
        told = {
            group.first_bad_run_id: [
                (s.name, sorted(type(f).__name__ for f in chosen))
                for s, chosen in notifications.selected_findings([vision, speech], group)
            ]
            for group in groups
        }
        assert told[broken_vision] == [
            ("vision", ["AggregateFinding", "CaseFailure", "CaseFailure"])
        ]
        assert told[broken_speech] == [("speech", ["CaseFailure"])]
        projects = {notifications.finding_of(f).project for f in failures}
        assert projects == {"vision", "speech"}

    # A rescan (each project of the machine and channel in turn) finds the same, once.
    with database.session_scope() as session:
        for failure in session.scalars(select(CaseFailure)).unique():
            session.delete(failure)
    with database.session_scope() as session:
        assert len(detection.rescan(session).failures) == 3
    assert findings(database) == found
    with database.session_scope() as session:
        assert detection.rescan(session).failures == []

    # Invalidating vision's last run before the break judges vision's runs again, alone:
    # its failures now follow the run before, and nothing else opens in either project.
    with database.session_scope() as session:
        corrections.invalidate(session, runs["vision"][-1], "a bad node", "test")
    assert findings(database) == found
    with database.session_scope() as session:
        moved = session.scalars(select(CaseFailure.last_passing_run_id).order_by(CaseFailure.id))
        assert sorted(moved) == sorted([runs["vision"][-2]] * 2 + [runs["speech"][-1]])
