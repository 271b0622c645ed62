"""A person corrects the detector: a finding it missed, a step moved a few runs; both audited."""

from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.core.db import Database
from tests.anomalies.test_service import BAD, dynamic_bert_slower, post_history, regressions
from tests.conftest import make_token


def headers(database: Database, scope: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {make_token(database, scope, name=f'{scope}-person')}"}


def series_id(client: TestClient, **where: str) -> int:
    (found,) = client.get("/api/v1/series", params=where).json()["items"]
    return int(found["id"])


def audit(client: TestClient, database: Database, action: str) -> list[dict[str, Any]]:
    answer = client.get(
        "/api/v1/audit", params={"action": action}, headers=headers(database, "admin")
    )
    items: list[dict[str, Any]] = answer.json()["items"]
    return items


def test_a_person_records_a_step_detection_missed(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    ids = post_history(client, ingest_headers, dynamic_bert_slower)
    resnet = series_id(client, model="resnet50", config="default", metric="latency")
    triager = headers(database, "triage")
    body = {"series_id": resnet, "first_bad_run_id": ids[30], "note": "seen on the dashboard"}
    made = client.post("/api/v1/regressions", json=body, headers=triager)
    assert made.status_code == 201, made.text
    found = made.json()
    assert (found["first_bad_run_id"], found["last_good_run_id"]) == (ids[30], ids[29])
    assert found["detector"]["name"] == "manual"
    assert found["detector"]["by"].startswith("triage-person")
    assert (found["state"], found["status"], found["note"]) == (
        "confirmed",
        "new",
        "seen on the dashboard",
    )
    assert found["before"] == pytest.approx(20.0, rel=0.02)  # resnet50's level either side
    assert found["confirmation"]["manual"]["by"].startswith("triage-person")
    group = client.get(f"/api/v1/alert-groups/{found['group_id']}").json()
    assert found["id"] in [r["id"] for r in group["regressions"]]
    (logged,) = audit(client, database, "regression.create")
    assert logged["target"] == f"regression:{found['id']}"
    assert logged["actor"].startswith("triage-person")
    assert logged["after"]["first_bad_run_id"] == ids[30]

    again = client.post(
        "/api/v1/regressions", json={**body, "first_bad_run_id": ids[32]}, headers=triager
    )
    assert again.status_code == 409, again.text  # two points away: the same step
    # Detection over later runs finds nothing new there: the person's step stands.
    post_history(client, ingest_headers, dynamic_bert_slower, runs=range(40, 44))
    at_resnet = [r for r in regressions(client) if r["series"]["id"] == resnet]
    assert [r["id"] for r in at_resnet] == [found["id"]]


@pytest.mark.parametrize(
    ("change", "status", "loc"),
    [
        ({"series_id": 99999}, 404, None),
        ({"first_bad_run_id": "first"}, 422, "first_bad_run_id"),
        ({"series_id": 0}, 422, "series_id"),
        ({"unknown": 1}, 422, "unknown"),
        ({"note": "x" * 10_001}, 422, "note"),
    ],
)
def test_a_manual_finding_is_refused_with_its_reason(
    client: TestClient,
    database: Database,
    ingest_headers: dict[str, str],
    change: dict[str, Any],
    status: int,
    loc: str | None,
) -> None:
    ids = post_history(client, ingest_headers, dynamic_bert_slower)
    resnet = series_id(client, model="resnet50", config="default", metric="latency")
    body = {"series_id": resnet, "first_bad_run_id": ids[30], **change}
    answer = client.post("/api/v1/regressions", json=body, headers=headers(database, "triage"))
    assert answer.status_code == status, answer.text
    if loc is not None:
        assert answer.json()["errors"][0]["loc"] == loc


def test_a_manual_finding_needs_a_point_before_it_and_the_triage_scope(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    ids = post_history(client, ingest_headers, dynamic_bert_slower)
    resnet = series_id(client, model="resnet50", config="default", metric="latency")
    first = {"series_id": resnet, "first_bad_run_id": ids[0]}
    answer = client.post("/api/v1/regressions", json=first, headers=headers(database, "triage"))
    assert answer.status_code == 422
    assert "first point" in answer.json()["errors"][0]["message"]
    graph_breaks = series_id(client, model="resnet50", config="default", metric="graph_breaks")
    zero = {"series_id": graph_breaks, "first_bad_run_id": ids[30]}  # 0 all along
    answer = client.post("/api/v1/regressions", json=zero, headers=headers(database, "triage"))
    assert answer.status_code == 422
    assert "level before" in answer.json()["errors"][0]["message"]
    later = {"series_id": resnet, "first_bad_run_id": ids[30]}
    assert client.post("/api/v1/regressions", json=later).status_code == 401
    read_only = client.post("/api/v1/regressions", json=later, headers=headers(database, "read"))
    assert read_only.status_code == 403


def test_a_step_moves_by_a_few_points_and_its_levels_follow(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    ids = post_history(client, ingest_headers, dynamic_bert_slower)
    (step,) = regressions(client)
    assert step["first_bad_run_id"] == ids[BAD]
    triager = headers(database, "triage")
    path = f"/api/v1/regressions/{step['id']}/position"
    moved = client.patch(path, json={"first_bad_run_id": ids[BAD + 2]}, headers=triager)
    assert moved.status_code == 200, moved.text
    found = moved.json()
    assert (found["first_bad_run_id"], found["last_good_run_id"]) == (ids[BAD + 2], ids[BAD + 1])
    # its levels are the points either side of the new place: two slow ones now before it
    assert found["p_value"] != step["p_value"]
    assert found["after"] == pytest.approx(11.0, rel=0.01)
    assert found["group_id"] == step["group_id"]
    assert found["confirmation"]["moved"]["from_run_id"] == ids[BAD]
    (logged,) = audit(client, database, "regression.move")
    assert logged["before"]["first_bad_run_id"] == ids[BAD]
    assert logged["after"]["first_bad_run_id"] == ids[BAD + 2]

    far = client.patch(path, json={"first_bad_run_id": ids[BAD + 9]}, headers=triager)
    assert far.status_code == 422
    assert far.json()["errors"][0]["loc"] == "first_bad_run_id"
    back = client.patch(path, json={"first_bad_run_id": ids[BAD]}, headers=triager)
    assert back.json()["first_bad_run_id"] == ids[BAD]
    missing = client.patch(
        "/api/v1/regressions/99999/position", json={"first_bad_run_id": ids[1]}, headers=triager
    )
    assert missing.status_code == 404
