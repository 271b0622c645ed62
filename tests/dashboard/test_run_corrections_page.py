"""The run page's corrections (admin, CSRF) and the audit page."""

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.core.config import Settings
from app.core.db import Database
from app.main import create_app
from tests.anomalies.test_service import post_history
from tests.dashboard.test_subscriptions_page import sign_in
from tests.runs.test_corrections import SPIKE, broken_once


@pytest.fixture
def web(settings: Settings) -> Iterator[TestClient]:
    """A browser-like client of the app that does not follow redirects."""
    application = create_app(settings)
    with TestClient(application, follow_redirects=False) as client:
        yield client
    application.state.database.dispose()


def test_an_admin_invalidates_and_deletes_from_the_run_page(
    web: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    ids = post_history(web, ingest_headers, broken_once, runs=range(SPIKE + 1))
    run = f"/runs/{ids[SPIKE]}"
    assert "Correct this run" not in web.get(run).text  # signed out: no forms
    csrf = sign_in(web, database, "admin")
    assert f'action="{run}/invalidate"' in web.get(run).text
    refused = web.post(f"{run}/invalidate", data={"reason": "throttled"})  # no CSRF value
    assert refused.status_code == 403
    done = web.post(f"{run}/invalidate", data={"reason": "GPU <b>throttled</b>", "csrf": csrf})
    assert (done.status_code, done.headers["location"]) == (303, f"{run}?done=invalidated")
    page = web.get(f"{run}?done=invalidated").text
    assert "Invalidated:" in page
    assert 'id="invalidated"' in page
    assert "GPU &lt;b&gt;throttled&lt;/b&gt;" in page
    assert f'action="{run}/invalidate"' not in page  # once is enough
    assert web.get("/api/v1/regressions", params={"status": "new"}).json()["items"] == []

    unticked = web.post(f"{run}/delete", data={"reason": "gone", "csrf": csrf})
    assert unticked.headers["location"] == f"{run}?done=unconfirmed"
    deleted = web.post(f"{run}/delete", data={"reason": "gone", "csrf": csrf, "confirm": "yes"})
    assert deleted.status_code == 303
    assert web.get(f"/api/v1/runs/{ids[SPIKE]}").status_code == 404
    audit = web.get(deleted.headers["location"]).text
    assert "run.delete" in audit
    assert "run.invalidate" in audit
    assert "admin (token #" in audit


def test_the_audit_page_is_for_admins(web: TestClient, database: Database) -> None:
    assert web.get("/audit").status_code in (302, 303, 307)  # to the sign-in form
    sign_in(web, database, "triage")
    assert web.get("/audit").status_code == 403
    sign_in(web, database, "admin")
    page = web.get("/audit", params={"action": "token."})
    assert page.status_code == 200
    assert "token.create" in page.text
