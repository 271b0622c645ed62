"""A localization's life on the worker (issue 28 point 1), on both databases: its suite run of
trigger ``localize``, started under a lease (a message delivered again does nothing; a lapsed
lease is taken over), probes recorded as they are judged, finished with its answer and costs.
Nothing of it enters the history: no run, no result."""

from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.core.db import Database, utcnow
from app.localization import lifecycle
from app.localization.lifecycle import Costs, ProbeRow
from app.localization.models import Localization
from app.runs.models import Result, Run
from app.suite_runs import service as suite_runs
from app.suite_runs.models import SuiteRun
from tests.localization.test_requests import _nightlies, _regression

pytestmark = pytest.mark.both_dialects

PROBE = ProbeRow(
    strategy="isolate",
    label="good with torch from bad",
    spec={"torch": "2.6.0.dev20260105"},
    outcome="bad",
    samples=[13.0, 13.1, 12.9],
    rounds=1,
    reason="bad: at 1.00 of the step",
    p_good=1e-4,
    p_bad=0.6,
    step_position=1.0,
    effect=0.3,
)


def _asked(client: TestClient, worker: dict[str, str], triage: dict[str, str]) -> dict[str, Any]:
    _nightlies(client, worker)
    body = {"kind": "regression", "id": _regression(client)["id"]}
    asked = client.post("/api/v1/localizations", json=body, headers=triage)
    assert asked.status_code == 201, asked.text
    made: dict[str, Any] = asked.json()
    return made


def _counts(database: Database) -> tuple[int, int]:
    with database.session_scope() as session:
        runs = session.scalar(select(func.count()).select_from(Run)) or 0
        results = session.scalar(select(func.count()).select_from(Result)) or 0
        return runs, results


def test_a_localization_is_started_recorded_and_finished_once(
    client: TestClient,
    database: Database,
    worker_headers: dict[str, str],
    triage_headers: dict[str, str],
) -> None:
    made = _asked(client, worker_headers, triage_headers)
    history = _counts(database)
    # Its suite run waits on the machine's queue, with no shards, for the worker.
    (listed,) = client.get("/api/v1/suite-runs", params={"machine": "h100-8"}).json()["items"]
    assert listed["id"] == made["suite_run_id"]
    assert (listed["trigger"], listed["status"], listed["tier"]) == ("localize", "queued", "daily")
    assert (listed["shards_total"], listed["run_id"]) == (0, None)
    with database.session_scope() as session:
        ((found, wait),) = lifecycle.stale_localizations(session, "h100-8")
        assert (found.id, wait) == (made["id"], 0.0)
        assert lifecycle.stale_localizations(session, "other-box") == []

    with database.session_scope() as session:
        claim = lifecycle.start(session, made["id"], "node-a", 60)
        assert (claim.outcome, claim.taken_over) == ("started", False)
        assert claim.lease
    lease = claim.lease
    with database.session_scope() as session:  # the same message again: it is running
        again = lifecycle.start(session, made["id"], "node-b", 60)
        assert again.outcome == "busy"
        assert 0 < again.wait_s <= 60
        ((_, wait),) = lifecycle.stale_localizations(session)
        assert 0 < wait <= 60
    running = client.get(f"/api/v1/localizations/{made['id']}").json()
    assert (running["state"], running["worker"]) == ("running", "node-a")
    assert running["started_at"] is not None
    suite_run = client.get(f"/api/v1/suite-runs/{made['suite_run_id']}").json()
    assert suite_run["status"] == "running"
    with database.session_scope() as session:  # running, no shard left to run: still no run
        assert suite_runs.finalize(session, made["suite_run_id"]) is None
    left = client.get(f"/api/v1/suite-runs/{made['suite_run_id']}").json()
    assert (left["status"], left["reason"], left["run_id"]) == ("running", "", None)

    costs = Costs(probe_count=1, repeats=0, builds=3, samples=30)
    with database.session_scope() as session:
        assert lifecycle.renew(session, made["id"], lease, 60)
        assert not lifecycle.renew(session, made["id"], "not-the-lease", 60)
        assert lifecycle.record_probe(session, made["id"], lease, PROBE, costs)
        assert not lifecycle.record_probe(session, made["id"], "not-the-lease", PROBE, costs)
    progress = client.get(f"/api/v1/localizations/{made['id']}").json()
    (probe,) = progress["probes"]
    assert (probe["position"], probe["strategy"], probe["outcome"]) == (0, "isolate", "bad")
    assert probe["samples"] == [13.0, 13.1, 12.9]
    assert (probe["p_good"], probe["step_position"], probe["effect"]) == (1e-4, 1.0, 0.3)
    assert (progress["probe_count"], progress["builds"], progress["samples"]) == (1, 3, 30)
    with database.session_scope() as session:  # the same label again: updated, not added
        grown = ProbeRow(**{**PROBE.__dict__, "samples": [13.0] * 6, "rounds": 2})
        assert lifecycle.record_probe(session, made["id"], lease, grown, costs)
    (probe,) = client.get(f"/api/v1/localizations/{made['id']}").json()["probes"]
    assert (len(probe["samples"]), probe["rounds"]) == (6, 2)

    answer = {"strategy": "component_isolation", "culprit": {"kind": "component"}}
    with database.session_scope() as session:
        assert not lifecycle.finish(
            session, made["id"], "not-the-lease", state="culprit_found", reason="x"
        )
        assert lifecycle.finish(
            session,
            made["id"],
            lease,
            state="culprit_found",
            reason="torch alone moves the case",
            answer=answer,
            costs=Costs(1, 1, 3, 40),
        )
    done = client.get(f"/api/v1/localizations/{made['id']}").json()
    assert (done["state"], done["reason"]) == ("culprit_found", "torch alone moves the case")
    assert done["answer"]["culprit"] == {"kind": "component"}
    assert done["answer"]["environment_diff"] == made["answer"]["environment_diff"]  # kept
    assert (done["repeats"], done["samples"], done["finished_at"] is not None) == (1, 40, True)
    suite_run = client.get(f"/api/v1/suite-runs/{made['suite_run_id']}").json()
    assert (suite_run["status"], suite_run["reason"], suite_run["run_id"]) == (
        "finished",
        "",
        None,
    )
    with database.session_scope() as session:  # delivered again once finished: nothing
        assert lifecycle.start(session, made["id"], "node-b", 60).outcome == "finished"
        assert lifecycle.stale_localizations(session) == []
    assert client.get(f"/api/v1/localizations/{made['id']}").json()["state"] == "culprit_found"
    assert _counts(database) == history  # probes are never runs or results


def test_a_lapsed_lease_is_taken_over_and_a_failure_fails_its_suite_run(
    client: TestClient,
    database: Database,
    worker_headers: dict[str, str],
    triage_headers: dict[str, str],
) -> None:
    made = _asked(client, worker_headers, triage_headers)
    with database.session_scope() as session:
        first = lifecycle.start(session, made["id"], "node-a", 60)
        assert lifecycle.record_probe(session, made["id"], first.lease, PROBE, Costs(1, 0, 3, 30))
    with database.session_scope() as session:  # node-a dies: its lease lapses
        found = session.get_one(Localization, made["id"])
        found.lease_until = utcnow() - timedelta(seconds=1)
    with database.session_scope() as session:
        second = lifecycle.start(session, made["id"], "node-b", 60)
        assert (second.outcome, second.taken_over) == ("started", True)
    over = client.get(f"/api/v1/localizations/{made['id']}").json()
    assert (over["worker"], over["probes"], over["probe_count"]) == ("node-b", [], 0)
    with database.session_scope() as session:  # node-a, back, may no longer write
        assert not lifecycle.record_probe(
            session, made["id"], first.lease, PROBE, Costs(1, 0, 3, 30)
        )
        assert lifecycle.finish(
            session, made["id"], second.lease, state="failed", reason="no command suite tb"
        )
    failed = client.get(f"/api/v1/localizations/{made['id']}").json()
    assert (failed["state"], failed["reason"]) == ("failed", "no command suite tb")
    with database.session_scope() as session:
        suite_run = session.get_one(SuiteRun, made["suite_run_id"])
        assert (suite_run.status, suite_run.reason) == ("failed", "no command suite tb")
        assert suite_run.run_id is None


def test_a_queued_localization_is_failed_without_a_lease(
    client: TestClient,
    database: Database,
    worker_headers: dict[str, str],
    triage_headers: dict[str, str],
) -> None:
    made = _asked(client, worker_headers, triage_headers)
    with database.session_scope() as session:
        assert lifecycle.finish(session, made["id"], None, state="failed", reason="no worker")
        assert not lifecycle.finish(session, made["id"], None, state="failed", reason="again")
    assert client.get(f"/api/v1/localizations/{made['id']}").json()["reason"] == "no worker"
