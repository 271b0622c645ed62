"""GET /api/v1/alert-groups counts a group's steps in SQL: it never loads them."""

from fastapi.testclient import TestClient

from app.core.db import Database
from tests.dashboard.test_alerts_statements import counted, group_of
from tests.factories import many_results, run_payload
from tests.posting import drain


def test_the_group_list_counts_steps_without_reading_them(
    client: TestClient, ingest_headers: dict[str, str], database: Database
) -> None:
    for index in range(2):
        payload = run_payload(f"groups-{index}", many_results(40), index=index)
        client.post("/api/v1/runs", json=payload, headers=ingest_headers).raise_for_status()
    drain(client)  # the runs' detection, in the background, reads steps too: not counted here
    few, _ = group_of(database, 2)
    many, _ = group_of(database, 30, skip=2)
    client.get("/api/v1/alert-groups").raise_for_status()  # the app's first request reads more

    with counted() as statements:
        answer = client.get("/api/v1/alert-groups", params={"limit": 500}).raise_for_status()
    counts = {g["id"]: g["counts"] for g in answer.json()["items"]}
    assert counts == {few: {"regression": 2}, many: {"regression": 30}}
    assert answer.json()["items"][0]["suites"] == ["torchbench"]
    steps_read = [s for s in statements if "FROM regression" in s and "count(" not in s]
    assert not steps_read  # before: every step of every group, with its series
