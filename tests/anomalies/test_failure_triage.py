"""Failure findings through the API: listed, filtered, triaged alone or with their group."""

import itertools
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select, update

from app.anomalies.models import STATUSES, AlertGroup, CaseFailure, Regression
from app.anomalies.triage import group_status, list_groups
from app.benchmarks.models import Series
from app.core.db import Database
from tests.anomalies.test_failures import MODELS, case
from tests.conftest import make_token
from tests.factories import run_payload
from tests.posting import post_detected

CRAFTED = '<script>alert("x")</script> CUDA error: an illegal memory access & more'
BREAKING = {"alexnet": "oom", "bert": "accuracy", "t5": "oom"}


def post_nightly(
    client: TestClient, headers: dict[str, str], index: int, outcomes: dict[str, str]
) -> int:
    """A nightly of every model; alexnet's failure, if any, carries the crafted reason."""
    rows = [row for model in MODELS for row in case(model, outcomes.get(model, "pass"))]
    for row in rows:
        if row["model"] == "alexnet" and row.get("status") == "failed":
            row["reason"] = CRAFTED
    return post_detected(client, headers, run_payload(f"n-{index}", rows, index=index))


def three_start_failing(client: TestClient, headers: dict[str, str]) -> list[int]:
    """Four passing nightlies, then one where alexnet, bert and t5 fail; the run ids."""
    runs = [post_nightly(client, headers, i, {}) for i in range(4)]
    return [*runs, post_nightly(client, headers, 4, BREAKING)]


def only_group(client: TestClient) -> dict[str, Any]:
    (group,) = client.get("/api/v1/alert-groups").json()["items"]
    detail: dict[str, Any] = client.get(f"/api/v1/alert-groups/{group['id']}").json()
    return detail


def test_a_groups_failures_are_listed_filtered_and_triaged(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    runs = three_start_failing(client, ingest_headers)
    (group,) = client.get("/api/v1/alert-groups").json()["items"]  # "new": only failures
    assert group["status"] == "new"
    assert group["counts"] == {"failure": 3}
    assert group["suites"] == ["torchbench"]
    assert group["metrics"] == ["accuracy", "latency"]
    detail = client.get(f"/api/v1/alert-groups/{group['id']}").json()
    assert detail["regressions"] == []
    failures = sorted(detail["failures"], key=lambda f: f["model"])
    assert [(f["model"], f["failure"]) for f in failures] == [
        ("alexnet", "failed"),
        ("bert", "accuracy"),
        ("t5", "failed"),
    ]
    alexnet = failures[0]
    assert alexnet["reason"] == CRAFTED
    assert (alexnet["machine"], alexnet["channel"], alexnet["config"]) == (
        "h100-8",
        "nightly",
        "cudagraphs",
    )
    assert (alexnet["last_passing_run_id"], alexnet["first_failing_run_id"]) == (runs[3], runs[4])
    assert alexnet["passing_again_run_id"] is None
    assert client.get(f"/api/v1/failures/{alexnet['id']}").json() == alexnet

    def listed(**params: object) -> list[str]:
        page = client.get("/api/v1/failures", params=params).json()
        assert page["total"] == len(page["items"])
        return sorted(f["model"] for f in page["items"])

    everything = ["alexnet", "bert", "t5"]
    assert listed() == everything
    assert listed(group_id=group["id"], machine="h100-8", channel="nightly") == everything
    assert listed(suite="torchbench", status="new", open="true", flaky="false") == everything
    assert listed(machine="a100-1") == listed(channel="stable") == listed(suite="hf") == []
    assert listed(open="false") == listed(flaky="true") == listed(group_id=group["id"] + 1) == []
    page = client.get("/api/v1/failures", params={"limit": 2, "page": 2}).json()
    assert (page["total"], len(page["items"]), page["page"]) == (3, 1, 2)

    triager = {"Authorization": f"Bearer {make_token(database, 'triage', name='tia')}"}
    endpoint = f"/api/v1/failures/{alexnet['id']}"
    answer = client.patch(endpoint, json={"status": "acknowledged"}, headers=triager)
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "acknowledged"
    assert answer.json()["triaged_by"].startswith("tia (token #")
    assert listed(status="acknowledged") == ["alexnet"]
    assert only_group(client)["status"] == "new"  # bert and t5 are still new
    for other in failures[1:]:
        client.patch(
            f"/api/v1/failures/{other['id']}", json={"status": "acknowledged"}, headers=triager
        )
    assert only_group(client)["status"] == "acknowledged"
    found = client.get("/api/v1/alert-groups", params={"status": "acknowledged"}).json()
    assert [g["id"] for g in found["items"]] == [group["id"]]
    assert client.get("/api/v1/alert-groups", params={"status": "new"}).json()["total"] == 0

    change = {"status": "fixed", "assignee": "ana", "bug_url": "https://bugs.example/15"}
    answer = client.patch(f"/api/v1/alert-groups/{group['id']}", json=change, headers=triager)
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "fixed"
    assert {(f["status"], f["assignee"], f["bug_url"]) for f in answer.json()["failures"]} == {
        ("fixed", "ana", "https://bugs.example/15")
    }
    assert listed(status="fixed") == everything


def test_a_failure_that_passes_again_is_no_longer_open(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    runs = three_start_failing(client, ingest_headers)
    runs.append(post_nightly(client, ingest_headers, 5, {"bert": "accuracy"}))
    still = client.get("/api/v1/failures", params={"open": "true"}).json()["items"]
    assert [f["model"] for f in still] == ["bert"]
    ended = client.get("/api/v1/failures", params={"open": "false"}).json()["items"]
    assert {(f["model"], f["passing_again_run_id"]) for f in ended} == {
        ("alexnet", runs[5]),
        ("t5", runs[5]),
    }


def test_failure_routes_refuse_what_they_must(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    three_start_failing(client, ingest_headers)
    (first, *_) = client.get("/api/v1/failures").json()["items"]
    triager = {"Authorization": f"Bearer {make_token(database, 'triage', name='t')}"}
    endpoint = f"/api/v1/failures/{first['id']}"
    assert client.patch(endpoint, json={"status": "gone"}, headers=triager).status_code == 422
    assert client.patch(endpoint, json={"colour": "red"}, headers=triager).status_code == 422
    assert client.patch(endpoint, json={}, headers=ingest_headers).status_code == 403
    assert client.patch(endpoint, json={"status": "fixed"}).status_code == 401
    missing = client.patch("/api/v1/failures/999", json={}, headers=triager)
    assert (missing.status_code, missing.json()["error"]) == (404, "FailureNotFound")
    assert client.get("/api/v1/failures/999").status_code == 404
    assert client.get("/api/v1/failures", params={"status": "gone"}).status_code == 422
    assert client.get("/api/v1/failures", params={"open": "maybe"}).status_code == 422


def test_the_status_filter_agrees_with_group_status_over_regressions_and_failures(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    runs = three_start_failing(client, ingest_headers)
    with database.session_scope() as session:
        group = session.scalars(select(AlertGroup)).one()
        failure_ids = [f.id for f in group.failures]
        # A regression beside the failures, so that both kinds decide the group's status.
        series = session.scalars(select(Series).order_by(Series.id)).first()
        assert series is not None
        regression = Regression(
            series_id=series.id,
            group_id=group.id,
            last_good_run_id=runs[3],
            first_bad_run_id=runs[4],
            direction="regression",
            before=10.0,
            after=11.0,
            before_spread=0.1,
            after_spread=0.1,
            rel_change=0.1,
            p_value=1e-6,
            detector={},
        )
        session.add(regression)
        session.flush()
        group_id, regression_id = group.id, regression.id
    for of_regression, of_failures in itertools.product(STATUSES, repeat=2):
        with database.session_scope() as session:
            session.execute(
                update(Regression)
                .where(Regression.id == regression_id)
                .values(status=of_regression)
            )
            session.execute(
                update(CaseFailure)
                .where(CaseFailure.id.in_(failure_ids))
                .values(status=of_failures)
            )
        with database.session_scope() as session:
            expected = group_status(session.get_one(AlertGroup, group_id))
            assert expected == min((of_regression, of_failures), key=STATUSES.index)
            for status in STATUSES:
                found, total = list_groups(session, status, None, None, None, 0, 10)
                wanted = [group_id] if status == expected else []
                assert ([g.id for g in found], total) == (wanted, len(wanted)), (
                    of_regression,
                    of_failures,
                )
