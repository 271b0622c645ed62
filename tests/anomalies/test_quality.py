"""Alert quality (issue 31, point 7): findings per week by kind, time to triage and to fix,
invalid shares, localization outcomes, overdue; through the API, and on the page with plots
(in Chromium too)."""

from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from app.anomalies.models import AlertGroup, Regression
from app.core.db import Database
from app.quality.service import week_of
from tests.anomalies.test_bulk_triage import findings
from tests.conftest import make_token


def history_of_triage(client: TestClient, database: Database) -> list[int]:
    """A group of four steps found 9 days ago (one marked invalid 24 h after, one fixed 48 h
    after), and one of two found now."""
    old = findings(database, 4)
    findings(database, 2, project="other")
    found = datetime.now(UTC) - timedelta(days=9)
    with database.session_scope() as session:
        session.execute(update(AlertGroup).where(AlertGroup.id == 1).values(created_at=found))
        session.execute(update(Regression).where(Regression.group_id == 1).values(created_at=found))
    headers = {"Authorization": f"Bearer {make_token(database, 'triage', name='sheriff')}"}
    for regression, status in ((old[0], "fixed"), (old[1], "invalid")):
        answer = client.patch(
            f"/api/v1/regressions/{regression}", json={"status": status}, headers=headers
        )
        assert answer.status_code == 200
    with database.session_scope() as session:
        for regression, hours in ((old[0], 48), (old[1], 24)):
            session.execute(
                update(Regression)
                .where(Regression.id == regression)
                .values(triaged_at=found + timedelta(hours=hours))
            )
    return old


@pytest.mark.both_dialects  # bounds, bad input or SQL that differs by dialect
def test_the_figures_of_a_team_that_triages(client: TestClient, database: Database) -> None:
    history_of_triage(client, database)
    found = client.get("/api/v1/alert-quality", params={"weeks": 4}).raise_for_status().json()
    assert len(found["weeks"]) == 4
    assert found["weeks"][-1] == str(week_of(datetime.now(UTC).date()))
    assert sum(found["per_week"]["regression"]) == 6
    nine_days_ago = week_of((datetime.now(UTC) - timedelta(days=9)).date())
    assert found["per_week"]["regression"][found["weeks"].index(str(nine_days_ago))] == 4
    # Per group, the unit people triage: its first triage (24 h), and its fix (48 h).
    assert found["time_to_triage"] == {"count": 1, "median_h": 24.0, "p90_h": 24.0}
    assert found["time_to_fix"] == {"count": 1, "median_h": 48.0, "p90_h": 48.0}
    (suite,) = found["invalid_share"]["suite"]
    assert (suite["labels"], suite["invalid"]) == (2, 1)
    assert found["overdue"] == 1  # the old group: two of its steps still new
    assert found["localizations"] == {}


@pytest.mark.both_dialects  # bounds, bad input or SQL that differs by dialect
def test_weeks_are_bounded(client: TestClient) -> None:
    assert client.get("/api/v1/alert-quality", params={"weeks": 53}).status_code == 422
    assert client.get("/api/v1/alert-quality", params={"weeks": 0}).status_code == 422


def test_the_page_shows_the_figures_and_their_plots(client: TestClient, database: Database) -> None:
    history_of_triage(client, database)
    page = client.get("/quality", params={"weeks": "4"}).text
    assert "Alert quality" in page
    assert "<strong>6</strong> findings found" in page
    assert "median <strong>24.0 h</strong>" in page
    for figure in ("per-week-figure", "times-figure", "invalid-figure", "localizations-figure"):
        assert f'id="{figure}"' in page
    assert 'href="/alerts?overdue=1"' in page
