"""A revision triaged once, in Chromium: every group it moved ticked, one status for all."""

import re

from fastapi.testclient import TestClient
from playwright.sync_api import Page, expect

from app.core.db import Database
from tests.anomalies.test_revisions import TORCH, a_bad_nightly
from tests.conftest import make_token


def test_a_revision_is_triaged_once_in_chromium(
    page: Page, database: Database, client: TestClient
) -> None:
    groups = a_bad_nightly(database)
    page.goto(f"/login?next=/revisions/{TORCH}")
    page.get_by_label("API token").fill(make_token(database, "triage", name="sheriff"))
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(re.compile(f"/revisions/{re.escape(TORCH)}$"))
    page.get_by_label("Select every group on this page").check()
    bulk = page.get_by_label("Triage the selected findings")
    expect(bulk).to_contain_text("3 selected")
    bulk.get_by_label("Status").select_option("acknowledged")
    bulk.get_by_label("Bug link").fill("https://github.com/pytorch/pytorch/issues/150000")
    with page.expect_event("load"):
        bulk.get_by_role("button", name="Apply to selected").click()
    statuses = {g: client.get(f"/api/v1/alert-groups/{g}").json()["status"] for g in groups}
    assert statuses == {
        groups[0]: "acknowledged",
        groups[1]: "acknowledged",
        groups[2]: "acknowledged",
        groups[3]: "new",
    }
