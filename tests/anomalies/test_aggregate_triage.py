"""Aggregate findings through the API: listed, filtered, read in their group, triaged."""

import itertools
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select, update

from app.anomalies.models import STATUSES, AggregateFinding, AlertGroup, CaseFailure
from app.anomalies.triage import group_status, list_groups
from app.core.db import Database
from tests.anomalies.test_aggregate_findings import nightly
from tests.conftest import make_token

BREAKING = {"model_1": "oom", "model_4": "accuracy", "model_7": "oom"}


def pass_rate_drops(client: TestClient, headers: dict[str, str]) -> list[int]:
    """Four nightlies, then one where three of ten models fail: the run ids."""
    runs = [nightly(client, headers, i) for i in range(4)]
    return [*runs, nightly(client, headers, 4, BREAKING)]


def listed(client: TestClient, **params: str | int) -> list[int]:
    page = client.get("/api/v1/aggregate-findings", params=params)
    assert page.status_code == 200, page.text
    body = page.json()
    assert body["total"] == len(body["items"])
    return [f["id"] for f in body["items"]]


def test_an_aggregate_finding_is_read_in_its_group_and_listed_by_its_filters(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    runs = pass_rate_drops(client, ingest_headers)
    (group,) = client.get("/api/v1/alert-groups").json()["items"]
    assert group["counts"] == {"failure": 3, "aggregate": 1}
    assert "pass_rate" in group["metrics"]
    detail = client.get(f"/api/v1/alert-groups/{group['id']}").json()
    (found,) = detail["aggregates"]
    failures = sorted(f["id"] for f in detail["failures"])
    assert {
        k: found[k] for k in ("machine", "channel", "suite", "config", "precision", "mode")
    } == {
        "machine": "h100-8",
        "channel": "nightly",
        "suite": "torchbench",
        "config": "cudagraphs",
        "precision": "bf16",
        "mode": "inference",
    }
    assert (found["stat"], found["rule"], found["before"], found["after"]) == (
        "pass_rate",
        "pass_rate_below",
        1.0,
        0.7,
    )
    assert (found["last_good_run_id"], found["first_bad_run_id"]) == (runs[3], runs[4])
    assert found["resolved_run_id"] is None
    assert found["explained_by"] == {"regressions": [], "failures": failures}
    assert (found["group_id"], found["status"]) == (group["id"], "new")
    assert client.get(f"/api/v1/aggregate-findings/{found['id']}").json() == found

    me = [found["id"]]
    assert listed(client) == me
    assert listed(client, machine="h100-8", channel="nightly", group_id=group["id"]) == me
    assert listed(client, suite="torchbench", config="cudagraphs", stat="pass_rate") == me
    assert listed(client, rule="pass_rate_below", status="new", open="true") == me
    assert listed(client, machine="a100") == listed(client, stat="geomean_speedup") == []
    assert listed(client, open="false") == listed(client, rule="step") == []

    nightly(client, ingest_headers, 5)  # every model passes again: the pass rate recovers
    assert listed(client, open="false") == me
    assert listed(client, open="true") == []


def test_triage_of_an_aggregate_finding_and_its_group(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    pass_rate_drops(client, ingest_headers)
    (found,) = client.get("/api/v1/aggregate-findings").json()["items"]
    triager = {"Authorization": f"Bearer {make_token(database, 'triage', name='tia')}"}
    group_id = found["group_id"]
    for failure in client.get(f"/api/v1/alert-groups/{group_id}").json()["failures"]:
        answer = client.patch(
            f"/api/v1/failures/{failure['id']}", json={"status": "acknowledged"}, headers=triager
        )
        assert answer.status_code == 200, answer.text
    group = client.get(f"/api/v1/alert-groups/{group_id}").json()
    assert group["status"] == "new"  # the aggregate finding is still new

    endpoint = f"/api/v1/aggregate-findings/{found['id']}"
    answer = client.patch(
        endpoint, json={"status": "acknowledged", "note": "3 OOMs"}, headers=triager
    )
    assert answer.status_code == 200, answer.text
    assert (answer.json()["status"], answer.json()["note"]) == ("acknowledged", "3 OOMs")
    assert answer.json()["triaged_by"].startswith("tia (token #")
    assert client.get(f"/api/v1/alert-groups/{group_id}").json()["status"] == "acknowledged"
    assert listed(client, status="acknowledged") == [found["id"]]

    change = {"status": "fixed", "assignee": "ana"}
    answer = client.patch(f"/api/v1/alert-groups/{group_id}", json=change, headers=triager)
    assert answer.status_code == 200, answer.text
    assert [(f["status"], f["assignee"]) for f in answer.json()["aggregates"]] == [("fixed", "ana")]


def test_aggregate_routes_refuse_what_they_must(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    pass_rate_drops(client, ingest_headers)
    (found,) = client.get("/api/v1/aggregate-findings").json()["items"]
    triager = {"Authorization": f"Bearer {make_token(database, 'triage', name='t')}"}
    endpoint = f"/api/v1/aggregate-findings/{found['id']}"
    assert client.patch(endpoint, json={"status": "gone"}, headers=triager).status_code == 422
    assert client.patch(endpoint, json={"before": 2.0}, headers=triager).status_code == 422
    assert client.patch(endpoint, json={}, headers=ingest_headers).status_code == 403
    assert client.patch(endpoint, json={"status": "fixed"}).status_code == 401
    missing = client.patch("/api/v1/aggregate-findings/999", json={}, headers=triager)
    assert (missing.status_code, missing.json()["error"]) == (404, "AggregateFindingNotFound")
    assert client.get("/api/v1/aggregate-findings/999").status_code == 404
    for bad in ({"status": "gone"}, {"open": "maybe"}, {"stat": "median"}, {"rule": "vibes"}):
        assert client.get("/api/v1/aggregate-findings", params=bad).status_code == 422


def test_the_status_filter_agrees_with_group_status_over_failures_and_aggregates(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    pass_rate_drops(client, ingest_headers)
    with database.session_scope() as session:
        group = session.scalars(select(AlertGroup)).one()
        group_id = group.id
        (aggregate_id,) = [f.id for f in group.aggregates]
        failure_ids = [f.id for f in group.failures]
    for of_aggregate, of_failures in itertools.product(STATUSES, repeat=2):
        with database.session_scope() as session:
            session.execute(
                update(AggregateFinding)
                .where(AggregateFinding.id == aggregate_id)
                .values(status=of_aggregate)
            )
            session.execute(
                update(CaseFailure)
                .where(CaseFailure.id.in_(failure_ids))
                .values(status=of_failures)
            )
        with database.session_scope() as session:
            expected = group_status(session.get_one(AlertGroup, group_id))
            assert expected == min((of_aggregate, of_failures), key=STATUSES.index)
            for status in STATUSES:
                found, total = list_groups(session, status, None, None, None, 0, 10)
                wanted = [group_id] if status == expected else []
                assert ([g.id for g in found], total) == (wanted, len(wanted)), (
                    of_aggregate,
                    of_failures,
                    status,
                )


def aggregate_only_group(database: Database) -> dict[str, Any]:
    """The ids of a group whose only member is its aggregate finding (failures moved away)."""
    with database.session_scope() as session:
        group = session.scalars(select(AlertGroup)).one()
        for failure in group.failures:
            session.delete(failure)
        return {"group": group.id, "aggregate": group.aggregates[0].id}


def test_a_group_of_an_aggregate_finding_alone_takes_its_status(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    pass_rate_drops(client, ingest_headers)
    ids = aggregate_only_group(database)
    for status in STATUSES:
        with database.session_scope() as session:
            session.execute(
                update(AggregateFinding)
                .where(AggregateFinding.id == ids["aggregate"])
                .values(status=status)
            )
        with database.session_scope() as session:
            found, _ = list_groups(session, status, None, None, None, 0, 10)
            assert [g.id for g in found] == [ids["group"]]
            assert group_status(session.get_one(AlertGroup, ids["group"])) == status
