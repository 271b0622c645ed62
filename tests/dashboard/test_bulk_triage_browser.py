"""Bulk triage from the alerts page in Chromium: 20 findings ticked, one status for all."""

import re

from fastapi.testclient import TestClient
from playwright.sync_api import Page, expect

from app.core.db import Database
from tests.anomalies.test_bulk_triage import findings
from tests.conftest import make_token


def test_twenty_findings_triaged_at_once(
    page: Page, client: TestClient, database: Database
) -> None:
    ids = findings(database, 25)
    page.goto("/alerts")
    expect(page.get_by_label("Triage the selected findings")).to_have_count(0)  # signed out
    page.goto("/login?next=/alerts")
    page.get_by_label("API token").fill(make_token(database, "triage", name="sheriff"))
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(re.compile(r"/alerts$"))
    bulk = page.get_by_label("Triage the selected findings")
    for one in ids[:20]:
        page.get_by_label(f"Select regression {one}", exact=True).check()
    expect(bulk).to_contain_text("20 selected")
    bulk.get_by_label("Status").select_option("acknowledged")
    bulk.get_by_label("Assignee").fill("pt2-oncall")
    with page.expect_event("load"):
        bulk.get_by_role("button", name="Apply to selected").click()
    stored = {r["id"]: r for r in client.get("/api/v1/regressions?limit=100").json()["items"]}
    assert [stored[one]["status"] for one in ids[:20]] == ["acknowledged"] * 20
    assert {stored[one]["assignee"] for one in ids[:20]} == {"pt2-oncall"}
    assert {stored[one]["status"] for one in ids[20:]} == {"new"}
    assert all("dashboard session #" in stored[one]["triaged_by"] for one in ids[:20])
