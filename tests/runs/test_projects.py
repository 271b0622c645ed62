"""Projects: a run's project keeps its histories apart; a token may be limited to one."""

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.core.db import Database
from app.tokens import service as tokens_service
from tests.conftest import PEPPER
from tests.factories import result, run_payload


def project_token(database: Database, project: str | None, *scopes: str) -> dict[str, str]:
    """Authorization headers of a token limited to ``project`` (None: every project)."""
    with database.session_scope() as session:
        _, plain = tokens_service.create_token(
            session, "ci", list(scopes or ("ingest",)), PEPPER, project=project
        )
    return {"Authorization": f"Bearer {plain}"}


def post(client: TestClient, headers: dict[str, str], **fields: Any) -> Any:
    payload = run_payload("gha-1", [result(value=4.2)], **fields)
    return client.post("/api/v1/runs", json=payload, headers=headers)


def test_a_project_limited_token_cannot_post_to_another_project(
    client: TestClient, database: Database
) -> None:
    vision = project_token(database, "vision")
    refused = post(client, vision, project="speech")
    assert refused.status_code == 403, refused.text
    body = refused.json()
    assert "vision" in body["detail"]
    assert "speech" in body["detail"]
    assert body["errors"][0]["loc"] == "body.project"
    assert post(client, vision).status_code == 403  # no project: the default one's
    stored = post(client, vision, project="vision")
    assert stored.status_code == 201, stored.text
    assert stored.json()["project"] == "vision"
    # An upload names its project in a field: refused the same way, with that field.
    upload = client.post(
        "/api/v1/uploads?format=native&project=speech",
        content=b'{"key": "u1", "machine": {"name": "a", "device": "cpu"}, "results": '
        b'[{"suite": "s", "model": "m", "metric": "latency", "value": 1.0}]}',
        headers={**vision, "Content-Type": "application/json"},
    )
    assert upload.status_code == 403, upload.text
    assert upload.json()["errors"][0]["loc"] == "project"
    # A token of every project posts for any.
    assert post(client, project_token(database, None), project="speech").status_code == 201


def test_two_projects_keep_their_own_series_and_keys(
    client: TestClient, database: Database
) -> None:
    headers = project_token(database, None)
    first = post(client, headers, project="vision")
    second = post(client, headers, project="speech")  # the same key, machine, case, channel
    default = post(client, headers)
    assert [r.status_code for r in (first, second, default)] == [201, 201, 201]
    assert [r.json()["key"] for r in (first, second, default)] == ["gha-1"] * 3  # as sent
    assert [r.json()["project"] for r in (first, second, default)] == [
        "vision",
        "speech",
        "default",
    ]
    assert len({r.json()["id"] for r in (first, second, default)}) == 3  # three runs
    assert post(client, headers, project="vision").status_code == 200  # a retry
    series = client.get("/api/v1/series").json()
    assert series["total"] == 3
    assert {s["project"] for s in series["items"]} == {"vision", "speech", "default"}
    vision = client.get("/api/v1/series?project=vision").json()["items"]
    assert len(vision) == 1
    points = client.get(f"/api/v1/series/{vision[0]['id']}/points").json()["points"]
    assert [p["run_id"] for p in points] == [first.json()["id"]]
    runs = client.get("/api/v1/runs?project=speech").json()["items"]
    assert [r["id"] for r in runs] == [second.json()["id"]]
    assert client.get("/api/v1/runs?project=nobody").json()["items"] == []
    assert client.get("/api/v1/machines?project=nobody").json() == []
    assert [m["name"] for m in client.get("/api/v1/machines?project=speech").json()] == ["h100-8"]
    assert client.get("/api/v1/runs?project=no%20such").status_code == 422


def test_a_key_that_reads_like_another_projects_blocks_nothing(
    client: TestClient, database: Database
) -> None:
    """(project, key) is a run's identity: no key of one project can take another's."""
    attacker = project_token(database, "default")
    for key in ("vision:gha-4242-1", "gha-4242-1"):  # the attack, and the plain key alike
        payload = run_payload(key, [result(value=4.2)])
        assert client.post("/api/v1/runs", json=payload, headers=attacker).status_code == 201
    colon = project_token(database, "vision:gha")  # a project whose name holds ":"
    payload = run_payload("4242-1", [result(value=4.2)], project="vision:gha")
    assert client.post("/api/v1/runs", json=payload, headers=colon).status_code == 201
    vision = project_token(database, "vision")
    payload = run_payload("gha-4242-1", [result(value=4.2)], project="vision")
    stored = client.post("/api/v1/runs", json=payload, headers=vision)
    assert stored.status_code == 201, stored.text  # before: 409, for good
    assert (stored.json()["project"], stored.json()["key"]) == ("vision", "gha-4242-1")
    retry = client.post("/api/v1/runs", json=payload, headers=vision)
    assert retry.status_code == 200, retry.text
    assert retry.json()["id"] == stored.json()["id"]
    changed = run_payload("gha-4242-1", [result(value=5.0)], project="vision")
    reused = client.post("/api/v1/runs", json=changed, headers=vision)
    assert reused.status_code == 409, reused.text
    assert "'vision'" in reused.json()["detail"]
    runs = client.get("/api/v1/runs?project=vision").json()["items"]
    assert [r["key"] for r in runs] == ["gha-4242-1"]


def test_shards_of_one_key_in_two_projects_make_two_runs(
    client: TestClient, database: Database
) -> None:
    headers = project_token(database, None)
    shard = {"name": "job-1", "expected": 2}
    ids = []
    for project in ("vision", "speech"):
        payload = run_payload("gha-7", [result(value=1.0)], project=project, shard=shard)
        response = client.post("/api/v1/runs", json=payload, headers=headers)
        assert response.status_code == 201, response.text
        assert response.json()["key"] == "gha-7/h100-8/nightly"
        ids.append(response.json()["id"])
    assert len(set(ids)) == 2


def project_history(client: TestClient, headers: dict[str, str], project: str) -> list[int]:
    """The regression history of ``tests.anomalies.test_service``, of a project; run ids."""
    from tests.anomalies.test_service import BAD, dynamic_bert_slower, history_rows
    from tests.factories import nightly

    noise = np.random.default_rng(0)
    ids = []
    for index in range(15, 40):
        payload = nightly(
            index,
            history_rows(index, noise, dynamic_bert_slower),
            torch="2.6.0.dev20260101" if index < BAD else "2.6.0.dev20260113",
        )
        response = client.post(
            "/api/v1/runs", json={**payload, "project": project}, headers=headers
        )
        assert response.status_code == 201, response.text
        ids.append(response.json()["id"])
    client.app.state.publisher.drain()  # type: ignore[attr-defined]  # detection, in process
    return ids


# The project rules are plain SQL filters, alike on both dialects: two histories with a real
# regression are detected once, on SQLite. Slow (some 7 s on 2 idle cores): 50 runs detected
# in process are what shows findings, alert groups and triage staying each project's.
@pytest.mark.slow
@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_findings_pages_and_triage_follow_their_project(
    client: TestClient, database: Database
) -> None:
    """The same regression at the same time on one machine, in two projects."""
    every = project_token(database, None)
    default_ids = project_history(client, every, "default")
    vision_ids = project_history(client, every, "vision")
    for route in ("regressions", "alert-groups"):
        assert client.get(f"/api/v1/{route}?project=default").json()["total"] == 1
        assert client.get(f"/api/v1/{route}?project=vision").json()["total"] == 1
    groups = client.get("/api/v1/alert-groups").json()["items"]
    assert sorted(g["project"] for g in groups) == ["default", "vision"]  # one group each
    (regression,) = client.get("/api/v1/regressions?project=default").json()["items"]
    assert regression["series"]["project"] == "default"
    change = {"status": "acknowledged"}
    vision = project_token(database, "vision", "triage")
    refused = client.patch(f"/api/v1/regressions/{regression['id']}", json=change, headers=vision)
    assert refused.status_code == 403, refused.text
    assert refused.json()["errors"][0]["loc"] == "path.regression_id"
    group = f"/api/v1/alert-groups/{regression['group_id']}"
    assert client.patch(group, json=change, headers=vision).status_code == 403
    default = project_token(database, "default", "triage")
    assert client.patch(group, json=change, headers=default).status_code == 200
    # The dashboard: a picker where two projects hold runs, the choice kept in its links.
    page = client.get("/alerts?project=vision&status=acknowledged").text
    assert 'id="project-picker"' in page
    assert 'href="/series?project=vision"' in page
    assert f'id="group-{regression["group_id"]}"' not in page
    shown = client.get("/alerts?project=default&status=acknowledged").text
    assert f'id="group-{regression["group_id"]}"' in shown
    assert f'href="/alerts?group={regression["group_id"]}&amp;project=default"' in shown
    summary = client.get("/api/v1/summary?machine=h100-8&project=vision").json()
    assert summary["run"]["id"] == vision_ids[-1]
    # The compare page's sides (run vs run: the two newest) are the project's runs.
    compared = client.get("/compare?kind=runs&project=vision").text
    assert f"run {vision_ids[-2]}<" in compared
    assert f"run {default_ids[-1]}<" not in compared
    assert f"run {default_ids[-1]}<" in client.get("/compare?kind=runs").text


def test_a_project_token_silences_and_unsilences_its_own_project_only(
    client: TestClient, database: Database
) -> None:
    vision = project_token(database, "vision", "triage")
    everyone = project_token(database, None, "triage")
    ends = (datetime.now(UTC) + timedelta(hours=2)).isoformat()

    def silence(headers: dict[str, str], **matchers: Any) -> Any:
        body = {"matchers": matchers, "ends_at": ends, "comment": "rack move"}
        return client.post("/api/v1/silences", json=body, headers=headers)

    own = silence(vision, machine="h100-*")
    assert own.status_code == 201, own.text
    matchers = {k: v for k, v in own.json()["matchers"].items() if v is not None}
    assert matchers == {"machine": ["h100-*"], "project": ["vision"]}
    for reaching in ("speech", ["vision", "speech"], "v*"):
        refused = silence(vision, machine="h100-*", project=reaching)
        assert refused.status_code == 403, refused.text
        assert refused.json()["errors"][0]["loc"] == "body.matchers.project"
    wide = silence(everyone, machine="h100-*")
    assert wide.status_code == 201, wide.text
    assert wide.json()["matchers"]["project"] is None  # every project's findings
    assert client.delete(f"/api/v1/silences/{wide.json()['id']}", headers=vision).status_code == 403
    ended = client.delete(f"/api/v1/silences/{own.json()['id']}", headers=vision)
    assert ended.status_code == 200, ended.text
    assert ended.json()["state"] == "expired"
    active = client.get("/api/v1/silences?state=active", headers=everyone).json()["items"]
    assert [s["id"] for s in active] == [wide.json()["id"]]
