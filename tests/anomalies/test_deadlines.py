"""Triage deadlines (issue 31, point 3): working days, overdue groups in the API, on the alerts
page with a filter, and in reminders."""

import random
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from app.anomalies import deadlines
from app.anomalies.deadlines import Deadlines, add_working_days, overdue_before
from app.anomalies.models import AlertGroup, Regression
from app.core.db import Database
from tests.anomalies.test_bulk_triage import findings
from tests.conftest import make_token

FRIDAY = datetime(2026, 12, 4, 15, 0, tzinfo=UTC)


def test_working_days_skip_weekends() -> None:
    monday = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
    assert add_working_days(monday, 2) == monday + timedelta(days=2)  # Wednesday 09:00
    assert add_working_days(FRIDAY, 2) == FRIDAY + timedelta(days=4)  # Tuesday 15:00
    saturday = FRIDAY + timedelta(hours=20)
    # A weekend counts from Monday 00:00: found later, never due earlier.
    assert add_working_days(saturday, 1) == datetime(2026, 12, 8, tzinfo=UTC)
    assert add_working_days(FRIDAY + timedelta(hours=8), 1) <= add_working_days(saturday, 1)


def test_the_cut_off_is_exactly_where_the_deadline_passes() -> None:
    rng = random.Random(4)
    for _ in range(300):
        now = FRIDAY + timedelta(minutes=rng.randrange(0, 60 * 24 * 21))
        days = rng.randrange(0, 6)
        cut = overdue_before(now, days)
        assert add_working_days(cut, days) <= now
        assert add_working_days(cut + timedelta(microseconds=2), days) > now
        found = now - timedelta(minutes=rng.randrange(0, 60 * 24 * 14))
        assert (add_working_days(found, days) <= now) == (found <= cut)


def test_overdue_is_for_the_new_and_the_acknowledged_without_a_bug() -> None:
    now = FRIDAY + timedelta(days=10)
    assert deadlines.overdue("new", "", FRIDAY, now) == "triage"
    assert deadlines.overdue("acknowledged", "", FRIDAY, now) == "bug"
    assert deadlines.overdue("acknowledged", "https://bugs.example/1", FRIDAY, now) == ""
    assert deadlines.overdue("fixed", "", FRIDAY, now) == ""
    assert deadlines.overdue("new", "", now, now) == ""
    assert deadlines.overdue("new", "", FRIDAY, now, Deadlines(triage_days=20)) == ""


def found_on(database: Database, group_id: int, when: datetime) -> None:
    with database.session_scope() as session:
        session.execute(update(AlertGroup).where(AlertGroup.id == group_id).values(created_at=when))
        session.execute(
            update(Regression).where(Regression.group_id == group_id).values(created_at=when)
        )


@pytest.fixture
def old_and_fresh(database: Database) -> tuple[int, int]:
    findings(database, 2)
    findings(database, 2, project="fresh")
    found_on(database, 1, datetime.now(UTC) - timedelta(days=9))
    return 1, 2


@pytest.mark.both_dialects  # bounds, bad input or SQL that differs by dialect
def test_groups_say_when_they_are_due_and_a_filter_finds_the_overdue(
    client: TestClient, database: Database, old_and_fresh: tuple[int, int]
) -> None:
    old, fresh = old_and_fresh
    groups = {g["id"]: g for g in client.get("/api/v1/alert-groups").json()["items"]}
    assert groups[old]["overdue"] == "triage"
    assert groups[fresh]["overdue"] == ""
    due = datetime.fromisoformat(groups[fresh]["triage_due_at"])
    assert due > datetime.now(UTC)
    listed = client.get("/api/v1/alert-groups", params={"overdue": "true"}).json()["items"]
    assert [g["id"] for g in listed] == [old]
    # Acknowledged without a bug link, it is late for the bug; with one, it is not late.
    token = make_token(database, "triage")
    headers = {"Authorization": f"Bearer {token}"}
    client.patch(f"/api/v1/alert-groups/{old}", json={"status": "acknowledged"}, headers=headers)
    assert client.get(f"/api/v1/alert-groups/{old}").json()["overdue"] == "bug"
    listed = client.get("/api/v1/alert-groups", params={"overdue": "true"}).json()["items"]
    assert [g["id"] for g in listed] == [old]
    bug = {"bug_url": "https://github.com/pytorch/pytorch/issues/1"}
    client.patch(f"/api/v1/alert-groups/{old}", json=bug, headers=headers)
    assert client.get("/api/v1/alert-groups", params={"overdue": "true"}).json()["items"] == []


def test_the_alerts_page_marks_and_filters_the_overdue(
    client: TestClient, old_and_fresh: tuple[int, int]
) -> None:
    old, fresh = old_and_fresh
    page = client.get("/alerts").text
    assert "overdue: triage" in page
    assert "triage due" in page  # the fresh group's deadline
    only = client.get("/alerts", params={"overdue": "1"}).text
    assert f"Alert group {old}<" in only
    assert f"Alert group {fresh}<" not in only
