"""The per-revision view (issue 31, point 6): everything whose first bad run carries a commit
or torch build, across machines, channels and projects; API, page and, in Chromium, triaged
once (in Chromium: ``tests/dashboard/test_revision_browser.py``)."""

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.core.db import Database
from app.runs.ingest import ingest_run
from app.runs.schemas import RunIn
from tests.anomalies.test_bulk_triage import record_steps
from tests.factories import result, run_payload

TORCH = "2.7.0.dev20260113"
SHA = "4f2b9c1d0e8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c"


def moved(
    session: Session, machine: str, channel: str, project: str, torch: str, count: int
) -> int:
    """Two runs of ``count`` models on a machine, the second on ``torch``: a group of steps."""
    runs = []
    for index, (level, build) in enumerate(((10.0, "2.7.0.dev20260112"), (12.0 + count, torch))):
        rows = [result(f"m{i:02d}", value=level * (1 + i / 10)) for i in range(count)]
        payload = run_payload(
            f"{machine}-{channel}-{project}-{torch}-{index}",
            rows,
            machine=machine,
            channel=channel,
            index=index,
            project=project,
            commit=SHA if build == torch == TORCH else "",
        )
        payload["environment"] = {
            "channel": channel,
            "torch": build,
            "torch_git_sha": SHA if build == TORCH else "",
        }
        runs.append(ingest_run(session, RunIn.model_validate(payload), source="upload").run.id)
    return record_steps(session, runs)[0].group_id


def a_bad_nightly(database: Database) -> list[int]:
    """One torch build moves three machines (two channels, two projects); another, one more."""
    with database.session_scope() as session:
        return [
            moved(session, "h100-8", "nightly", "default", TORCH, 3),
            moved(session, "mi300x-1", "nightly", "default", TORCH, 2),
            moved(session, "a100-4", "main", "vision", TORCH, 1),
            moved(session, "h100-9", "nightly", "default", "2.7.0.dev20260120", 2),
        ]


@pytest.mark.both_dialects  # bounds, bad input or SQL that differs by dialect
def test_the_api_gathers_what_one_build_moved(client: TestClient, database: Database) -> None:
    first, second, third, _ = a_bad_nightly(database)
    found = client.get(f"/api/v1/revisions/{TORCH}").raise_for_status().json()
    assert sorted(g["id"] for g in found["groups"]) == [first, second, third]
    assert {g["project"] for g in found["groups"]} == {"default", "vision"}
    assert found["matched"] == {"torch": 3}
    assert found["counts"]["device"] == {"cuda": 6}  # run_payload's machines are all cuda
    assert sum(found["counts"]["suite"].values()) == 6
    assert len(found["worst"]) == 6
    changes = [abs(r["rel_change"]) for r in found["worst"]]
    assert changes == sorted(changes, reverse=True)
    by_sha = client.get(f"/api/v1/revisions/{SHA[:8]}").json()
    assert sorted(g["id"] for g in by_sha["groups"]) == [first, second, third]
    unknown = client.get("/api/v1/revisions/nothing-here")
    assert unknown.status_code == 404
    assert "carries 'nothing-here'" in unknown.json()["detail"]
    assert client.get(f"/api/v1/revisions/{'x' * 129}").status_code == 422


def test_the_page_lists_the_groups_and_links_from_the_alerts(
    client: TestClient, database: Database
) -> None:
    a_bad_nightly(database)
    page = client.get(f"/revisions/{TORCH}").text
    assert "3 alert groups" in page
    assert "a100-4, h100-8, mi300x-1" in page
    assert "Worst steps" in page
    assert "with a <code>triage</code> token to triage these groups at once" in page
    alerts = client.get("/alerts").text
    assert f'href="/revisions/{TORCH}"' in alerts
