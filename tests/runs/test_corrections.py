"""Invalidating or deleting a bad run: it leaves history, and what it caused is withdrawn."""

from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.core.db import Database
from app.models import Base
from app.runs.models import InvalidatedResult, Result
from tests.anomalies.test_failures import nightly as failing_nightly
from tests.anomalies.test_service import BAD, RUNS, dynamic_bert_slower, post_history, regressions
from tests.conftest import make_token
from tests.factories import result, run_payload
from tests.runs.test_projects import post, project_token
from tests.runs.test_shards import shard

SPIKE = 30  # the broken run: bert/dynamic twice as slow, once


def broken_once(model: str, config: str, index: int) -> dict[str, float]:
    if model == "bert" and config == "dynamic" and index == SPIKE:
        return {"latency": 20.0}
    return {}


def admin(database: Database) -> dict[str, str]:
    return {"Authorization": f"Bearer {make_token(database, 'admin', name='ops')}"}


def bert_dynamic_latency(client: TestClient) -> dict[str, Any]:
    found = client.get(
        "/api/v1/series",
        params={"model": "bert", "config": "dynamic", "metric": "latency"},
    ).json()["items"]
    (series,) = found
    return dict(series)


def series_run_ids(client: TestClient, series_id: int) -> list[int]:
    points = client.get(f"/api/v1/series/{series_id}/points").json()
    return [p["run_id"] for p in points["points"]]


def test_invalidating_the_run_that_caused_a_step_withdraws_it(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    ids = post_history(client, ingest_headers, broken_once, runs=range(SPIKE + 1))
    (found,) = [r for r in regressions(client) if r["status"] == "new"]
    assert found["first_bad_run_id"] == ids[SPIKE]
    headers = admin(database)

    answer = client.post(
        f"/api/v1/runs/{ids[SPIKE]}/invalidate", json={"reason": "GPU throttled"}, headers=headers
    )
    assert answer.status_code == 200, answer.text
    assert found["id"] in answer.json()["withdrawn_regressions"]
    assert answer.json()["new_regressions"] == []
    (withdrawn,) = regressions(client)
    assert (withdrawn["state"], withdrawn["status"]) == ("withdrawn", "invalid")
    assert "GPU throttled" in withdrawn["confirmation"]["withdrawn"]["why"]
    run = client.get(f"/api/v1/runs/{ids[SPIKE]}").json()
    assert (run["status"], run["invalidated_reason"]) == ("invalid", "GPU throttled")
    assert run["results"] == []
    series = bert_dynamic_latency(client)
    assert ids[SPIKE] not in series_run_ids(client, series["id"])
    # The newest valid run is the machine's latest again, on the summary and the overview.
    summary = client.get("/api/v1/summary", params={"machine": "h100-8"}).json()
    assert summary["run"]["id"] == ids[SPIKE - 1]
    overview = client.get("/").text
    assert f'href="/runs/{ids[SPIKE - 1]}"' in overview
    assert f'href="/runs/{ids[SPIKE]}"' not in overview
    # Twice is refused; the previous level is the baseline again: a normal run raises nothing.
    again = client.post(
        f"/api/v1/runs/{ids[SPIKE]}/invalidate", json={"reason": "again"}, headers=headers
    )
    assert again.status_code == 409
    post_history(client, ingest_headers, broken_once, runs=range(SPIKE + 1, SPIKE + 4))
    assert [r["id"] for r in regressions(client)] == [found["id"]]
    assert regressions(client, status="new") == []


def test_restoring_an_invalidated_run_puts_it_back_and_finds_its_step_again(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    ids = post_history(client, ingest_headers, broken_once, runs=range(SPIKE + 1))
    (found,) = regressions(client)
    headers = admin(database)
    url = f"/api/v1/runs/{ids[SPIKE]}"
    assert client.post(f"{url}/restore", headers=headers).status_code == 409  # not invalid
    client.post(f"{url}/invalidate", json={"reason": "wrong"}, headers=headers)
    assert client.post(f"{url}/restore").status_code == 401

    answer = client.post(f"{url}/restore", headers=headers)
    assert answer.status_code == 200, answer.text
    assert answer.json()["reopened_regressions"] == [found["id"]]
    assert answer.json()["new_regressions"] == []
    run = client.get(url).json()
    assert (run["status"], run["invalidated_reason"], run["invalidated_at"]) == (
        "completed",
        "",
        None,
    )
    assert run["results"]
    assert ids[SPIKE] in series_run_ids(client, bert_dynamic_latency(client)["id"])
    (back,) = regressions(client)
    keep = ("id", "status", "state", "first_bad_run_id", "last_good_run_id", "group_id")
    assert {k: back[k] for k in keep} == {k: found[k] for k in keep}
    log = client.get("/api/v1/audit", params={"target": f"run:{ids[SPIKE]}"}, headers=headers)
    assert [e["action"] for e in log.json()["items"]][:2] == ["run.restore", "run.invalidate"]
    with database.session_scope() as session:
        kept = select(func.count()).select_from(InvalidatedResult)
        assert session.scalar(kept) == 0
    assert client.post(f"{url}/restore", headers=headers).status_code == 409


def test_restoring_undoes_what_the_invalidation_found_without_the_run(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    ids = post_history(client, ingest_headers, dynamic_bert_slower)
    (step,) = regressions(client)
    headers = admin(database)
    url = f"/api/v1/runs/{ids[BAD]}"
    invalidated = client.post(f"{url}/invalidate", json={"reason": "x"}, headers=headers).json()
    (later,) = invalidated["new_regressions"]  # the step, one run later
    assert invalidated["withdrawn_regressions"] == [step["id"]]

    restored = client.post(f"{url}/restore", headers=headers).json()
    assert restored["reopened_regressions"] == [step["id"]]
    assert later in restored["withdrawn_regressions"]
    (open_step,) = regressions(client, status="new")
    assert (open_step["id"], open_step["first_bad_run_id"]) == (step["id"], ids[BAD])


def test_invalidating_an_ordinary_run_changes_nothing_else(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    ids = post_history(client, ingest_headers, dynamic_bert_slower)
    (before,) = regressions(client)
    answer = client.post(
        f"/api/v1/runs/{ids[5]}/invalidate", json={"reason": "duplicate"}, headers=admin(database)
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["withdrawn_regressions"] == []
    assert answer.json()["new_regressions"] == []
    (after,) = regressions(client)
    keep = ("id", "state", "status", "first_bad_run_id", "last_good_run_id", "group_id")
    assert {k: after[k] for k in keep} == {k: before[k] for k in keep}
    assert after["before"] == before["before"]


def test_a_step_whose_last_good_run_goes_keeps_its_first_bad_run(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    ids = post_history(client, ingest_headers, dynamic_bert_slower)
    (before,) = regressions(client)
    assert before["last_good_run_id"] == ids[BAD - 1]
    answer = client.post(
        f"/api/v1/runs/{ids[BAD - 1]}/invalidate", json={"reason": "bad"}, headers=admin(database)
    )
    assert answer.status_code == 200, answer.text
    (after,) = regressions(client)
    assert (after["id"], after["status"], after["state"]) == (before["id"], "new", "confirmed")
    assert (after["last_good_run_id"], after["first_bad_run_id"]) == (ids[BAD - 2], ids[BAD])


def test_deleting_a_run_removes_its_rows_and_leaves_nothing_dangling(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    ids = post_history(client, ingest_headers, dynamic_bert_slower, runs=range(RUNS))
    (step,) = regressions(client)
    headers = admin(database)
    invalid = client.post(
        f"/api/v1/runs/{ids[3]}/invalidate", json={"reason": "bad"}, headers=headers
    )
    assert invalid.status_code == 200
    for run_id in (ids[3], ids[BAD], ids[-1]):  # invalid first, then the step's, the newest
        answer = client.delete(f"/api/v1/runs/{run_id}", headers=headers)
        assert answer.status_code == 200, answer.text
        assert answer.json()["deleted"] is True
        assert client.get(f"/api/v1/runs/{run_id}").status_code == 404
    assert client.delete(f"/api/v1/runs/{ids[3]}", headers=headers).status_code == 404
    with database.session_scope() as session:
        for table in (Result, InvalidatedResult):
            gone = select(func.count()).select_from(table)
            assert session.scalar(gone.where(table.run_id.in_([ids[3], ids[BAD]]))) == 0
        # Every foreign key still points at a row (SQLite does not check them here).
        for table in Base.metadata.sorted_tables:
            for fk in table.foreign_keys:
                parent = fk.column.table
                orphans = (
                    select(func.count())
                    .select_from(table)
                    .where(
                        fk.parent.is_not(None),
                        ~select(fk.column).where(fk.column == fk.parent).exists(),
                    )
                )
                assert session.scalar(orphans) == 0, f"{table.name}.{fk.parent.name} -> {parent}"
    # The step went with its first bad run; detection found it again on what is left.
    remaining = regressions(client)
    assert step["id"] not in [r["id"] for r in remaining]
    assert [r["first_bad_run_id"] for r in remaining if r["state"] == "confirmed"] == [ids[BAD + 1]]


def test_only_admin_may_correct(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    ids = post_history(client, ingest_headers, runs=range(2))
    triage = {"Authorization": f"Bearer {make_token(database, 'triage', name='t')}"}
    body = {"reason": "no"}
    assert client.post(f"/api/v1/runs/{ids[0]}/invalidate", json=body).status_code == 401
    assert (
        client.post(f"/api/v1/runs/{ids[0]}/invalidate", json=body, headers=triage).status_code
        == 403
    )
    assert client.delete(f"/api/v1/runs/{ids[0]}", headers=triage).status_code == 403
    assert client.get("/api/v1/audit", headers=triage).status_code == 403
    assert client.get(f"/api/v1/runs/{ids[0]}").json()["status"] == "completed"


def test_an_invalidated_sharded_run_takes_no_further_shard(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    first = client.post("/api/v1/runs", json=shard("a", ("m1", "m2")), headers=ingest_headers)
    assert first.status_code == 201, first.text
    run_id = first.json()["id"]
    answer = client.post(
        f"/api/v1/runs/{run_id}/invalidate", json={"reason": "bad"}, headers=admin(database)
    )
    assert answer.status_code == 200, answer.text
    retry = client.post("/api/v1/runs", json=shard("a", ("m1", "m2")), headers=ingest_headers)
    assert retry.status_code == 200  # a retry of a stored shard answers as before
    later = client.post("/api/v1/runs", json=shard("b", ("m3",)), headers=ingest_headers)
    assert later.status_code == 409
    assert "invalidated" in later.json()["detail"]
    with database.session_scope() as session:
        stored = select(func.count()).select_from(Result).where(Result.run_id == run_id)
        assert session.scalar(stored) == 0


def test_a_failure_whose_last_passing_run_goes_stands(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    runs = [failing_nightly(client, ingest_headers, i, {}) for i in range(4)]
    runs.append(failing_nightly(client, ingest_headers, 4, {"bert": "oom"}))
    headers = admin(database)
    answer = client.post(
        f"/api/v1/runs/{runs[3]}/invalidate", json={"reason": "x"}, headers=headers
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["withdrawn_failures"] == []
    (failure,) = client.get("/api/v1/failures").json()["items"]
    assert (failure["status"], failure["first_failing_run_id"]) == ("new", runs[4])
    assert failure["last_passing_run_id"] == runs[2]
    # The run where it began failing is another matter: withdrawn, and nothing new opens.
    answer = client.post(
        f"/api/v1/runs/{runs[4]}/invalidate", json={"reason": "y"}, headers=headers
    )
    assert answer.json()["withdrawn_failures"] == [failure["id"]]
    (withdrawn,) = client.get("/api/v1/failures").json()["items"]
    assert withdrawn["status"] == "invalid"
    assert f"run {runs[4]} invalidated: y" in withdrawn["note"]


def test_a_project_limited_admin_corrects_its_own_project_only(
    client: TestClient, database: Database
) -> None:
    everyone = project_token(database, None, "ingest")
    vision_run = post(client, everyone, project="vision").json()["id"]
    speech_run = run_payload("gha-2", [result(value=4.2)], project="speech")
    speech_run = client.post("/api/v1/runs", json=speech_run, headers=everyone).json()["id"]
    vision_admin = project_token(database, "vision", "admin")
    body = {"reason": "bad node"}
    for path in (f"{speech_run}/invalidate", f"{speech_run}/restore"):
        refused = client.post(f"/api/v1/runs/{path}", json=body, headers=vision_admin)
        assert refused.status_code == 403, refused.text
        assert refused.json()["errors"][0]["loc"] == "path.run_id"
    assert client.delete(f"/api/v1/runs/{speech_run}", headers=vision_admin).status_code == 403
    assert client.get(f"/api/v1/runs/{speech_run}").json()["status"] == "completed"
    allowed = client.post(f"/api/v1/runs/{vision_run}/invalidate", json=body, headers=vision_admin)
    assert allowed.status_code == 200, allowed.text
