"""The states on-call uses (issue 31, point 5): infra, duplicate of a group, downstream of one,
with the link kept, checked and cleared; on the alerts page with a link to the other group."""

from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.core.db import Database
from tests.anomalies.test_bulk_triage import findings
from tests.conftest import make_token, sign_in


@pytest.fixture
def triager(database: Database) -> dict[str, str]:
    return {"Authorization": f"Bearer {make_token(database, 'triage')}"}


def two_groups(database: Database) -> tuple[int, int]:
    findings(database, 2)
    findings(database, 2, project="nightly-vs-main")
    return 1, 2


def patch(client: TestClient, headers: dict[str, str], path: str, body: dict[str, Any]) -> Any:
    return client.patch(f"/api/v1/{path}", json=body, headers=headers)


def test_a_duplicate_group_keeps_its_link_and_its_findings_too(
    client: TestClient, database: Database, triager: dict[str, str]
) -> None:
    first, second = two_groups(database)
    answer = patch(
        client,
        triager,
        f"alert-groups/{second}",
        {"status": "duplicate", "related_group_id": first},
    )
    assert answer.status_code == 200, answer.text
    group = answer.json()
    assert (group["status"], group["related_group_id"]) == ("duplicate", first)
    assert {(r["status"], r["related_group_id"]) for r in group["regressions"]} == {
        ("duplicate", first)
    }
    page = client.get("/alerts", params={"status": "duplicate"}).text
    assert f'of <a href="/alerts?group={first}">alert group {first}</a>' in page
    # Another status clears the link.
    cleared = patch(client, triager, f"alert-groups/{second}", {"status": "acknowledged"}).json()
    assert cleared["related_group_id"] is None
    assert {r["related_group_id"] for r in cleared["regressions"]} == {None}


def test_downstream_and_infra_are_statuses_of_findings(
    client: TestClient, database: Database, triager: dict[str, str]
) -> None:
    first, _ = two_groups(database)
    step = client.get("/api/v1/regressions", params={"group_id": 2}).json()["items"][0]
    found = patch(
        client,
        triager,
        f"regressions/{step['id']}",
        {"status": "downstream", "related_group_id": first},
    )
    assert (found.json()["status"], found.json()["related_group_id"]) == ("downstream", first)
    other = client.get("/api/v1/regressions", params={"group_id": 1}).json()["items"][0]
    infra = patch(client, triager, f"regressions/{other['id']}", {"status": "infra"})
    assert infra.json()["status"] == "infra"
    listed = client.get("/api/v1/regressions", params={"status": "infra"}).json()["items"]
    assert [r["id"] for r in listed] == [other["id"]]
    # The group shows its most pressing member's status: new before infra.
    assert client.get("/api/v1/alert-groups/1").json()["status"] == "new"


@pytest.mark.both_dialects  # bounds, bad input or SQL that differs by dialect
@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"status": "duplicate"}, 422),  # of which group?
        ({"status": "acknowledged", "related_group_id": 1}, 422),  # a link without its status
        ({"status": "duplicate", "related_group_id": 2}, 422),  # of itself
        ({"status": "duplicate", "related_group_id": 999}, 404),
    ],
)
def test_a_link_is_checked(
    client: TestClient, database: Database, triager: dict[str, str], body: dict[str, Any], code: int
) -> None:
    two_groups(database)
    answer = patch(client, triager, "alert-groups/2", body)
    assert answer.status_code == code, answer.text
    if code == 422:
        assert answer.json()["errors"][0]["loc"] == "body.related_group_id"
    assert client.get("/api/v1/alert-groups/2").json()["status"] == "new"


def test_the_group_actions_offer_the_new_states(client: TestClient, database: Database) -> None:
    two_groups(database)
    sign_in(client, database, "triage")
    page = client.get("/alerts").text
    for state in ("infra", "duplicate", "downstream"):
        assert f'name="status" value="{state}"' in page
    assert 'name="related_group_id"' in page
