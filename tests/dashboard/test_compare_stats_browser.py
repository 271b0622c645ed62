"""The compare's unsure case in Chromium: its tag, its distributions, its re-run button."""

import re

from fastapi.testclient import TestClient
from playwright.sync_api import Page, expect

from app.core.db import Database
from tests.conftest import make_token
from tests.summaries.test_compare_stats import two_runs


def test_the_unsure_case_and_its_rerun_button_in_chromium(
    page: Page, client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    base, new = two_runs(client, ingest_headers)
    token_page = f"/compare?kind=runs&machine=h100-8&base_run={base}&new_run={new}"
    page.goto(token_page)
    unsure = page.get_by_role("row", name=re.compile(r"^t5 "))
    expect(unsure.locator(".tag.unsure")).to_be_visible()
    expect(unsure).to_contain_text("needs more runs")
    expect(page.get_by_role("button", name="Re-run")).to_have_count(0)
    expect(page.get_by_label("Cases that need more runs")).to_contain_text("Sign in")
    expect(page.locator("[data-figure^='samples-'] .main-svg").first).to_be_visible()
    page.goto(f"/login?next={token_page.replace('&', '%26')}")
    page.get_by_label("API token").fill(make_token(database, "trigger", name="on-call"))
    page.get_by_role("button", name="Sign in").click()
    button = page.get_by_role("button", name="Re-run")
    expect(button).to_be_visible()
    button.click()
    expect(page.get_by_role("status").filter(has_text="Run")).to_contain_text(
        "not measured by a benchwatch worker"
    )
