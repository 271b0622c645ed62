"""Suite runs through the API and on the dashboard: progress per shard, and why one failed."""

from fastapi.testclient import TestClient

from app.core.db import Database
from app.suite_runs import service
from app.suite_runs.models import SuiteRun
from tests.conftest import make_token
from tests.suite_runs.test_service import measured, open_run, service_run_id


def test_a_suite_run_in_flight_and_its_shards(client: TestClient, database: Database) -> None:
    first, second = open_run(database)
    with database.session_scope() as session:
        lease = service.claim_shard(session, first, "w1", 30).lease
        service.finish_shard(session, first, lease, measured("matmul", 1.0), "")
        service.claim_shard(session, second, "w2", 30)
    listing = client.get("/api/v1/suite-runs", params={"machine": "box"}).json()
    assert listing["total"] == 1
    (item,) = listing["items"]
    assert (item["status"], item["shards_total"]) == ("running", 2)
    assert item["shards_by_status"] == {"done": 1, "running": 1}
    detail = client.get(f"/api/v1/suite-runs/{item['id']}").json()
    assert [(s["label"], s["status"], s["worker"]) for s in detail["shards"]] == [
        ("matmul inference", "done", "w1"),
        ("softmax inference", "running", "w2"),
    ]
    assert detail["shards"][1]["lease_until"] is not None
    assert client.get("/api/v1/suite-runs", params={"status": "failed"}).json()["total"] == 0
    page = client.get("/suite-runs")
    assert page.status_code == 200
    assert "1 done, 1 running of 2 shards" in page.text


def test_a_failed_suite_run_says_why(client: TestClient, database: Database) -> None:
    first, second = open_run(database)
    with database.session_scope() as session:
        for shard_id in (first, second):
            lease = service.claim_shard(session, shard_id, "w1", 30).lease
            service.finish_shard(session, shard_id, lease, None, "failed 3 times; last: OOM")
    with database.session_scope() as session:
        suite_run = session.get(SuiteRun, service_run_id(database))
        assert suite_run is not None
        suite_run.status, suite_run.reason = "failed", "the run could not be ingested: boom"
    failed = client.get("/api/v1/suite-runs", params={"status": "failed"}).json()["items"]
    assert [s["reason"] for s in failed] == ["the run could not be ingested: boom"]
    page = client.get("/suite-runs").text
    assert "the run could not be ingested: boom" in page
    assert "failed 3 times; last: OOM" in page


def test_unknown_and_impossible_suite_runs(client: TestClient) -> None:
    assert client.get("/api/v1/suite-runs/12345").status_code == 404
    assert client.get("/api/v1/suite-runs/99999999999999999999").status_code == 422
    assert client.get("/api/v1/suite-runs", params={"status": "lost"}).status_code == 422
    assert "No suite run yet" in client.get("/suite-runs").text


def test_a_failed_process_output_is_for_a_token_or_sign_in_only(
    client: TestClient, database: Database
) -> None:
    first, second = open_run(database)
    tail = "; output: connecting to postgres://ci:hunter2@db"
    with database.session_scope() as session:
        for shard_id in (first, second):
            lease = service.claim_shard(session, shard_id, "w1", 30).lease
            service.finish_shard(session, shard_id, lease, None, f"the command exited 7{tail}")
    with database.session_scope() as session:
        suite_run = session.get(SuiteRun, service_run_id(database))
        assert suite_run is not None
        suite_run.status, suite_run.reason = "failed", f"no results: matmul: exit 7{tail}"
    one = f"/api/v1/suite-runs/{service_run_id(database)}"
    anonymous = [client.get(one).text, client.get("/api/v1/suite-runs").text]
    anonymous.append(client.get("/suite-runs").text)
    for answer in anonymous:
        assert "hunter2" not in answer
        assert "exit" in answer  # the reason up to the output
    token = make_token(database, "read", name="reader")
    detail = client.get(one, headers={"Authorization": f"Bearer {token}"}).json()
    assert detail["reason"].endswith(tail)
    assert [s["reason"] for s in detail["shards"]] == [f"the command exited 7{tail}"] * 2
    listed = client.get("/api/v1/suite-runs", headers={"Authorization": f"Bearer {token}"})
    assert listed.json()["items"][0]["reason"].endswith(tail)
    signed = client.post("/login", data={"token": token}, follow_redirects=False)
    assert signed.status_code == 303
    assert "hunter2" in client.get("/suite-runs").text
