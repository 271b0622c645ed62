"""The backtest page in headless Chromium: a signed-in triager tries stricter thresholds and
reads what they would drop, with its triage label, beside the precision now and with them."""

import re

from fastapi.testclient import TestClient
from playwright.sync_api import Page, expect

from app.core.db import Database
from tests.anomalies.test_service import dynamic_bert_slower, post_history, regressions
from tests.conftest import make_token


def test_a_backtest_run_from_the_page_reports_what_would_change(
    page: Page, client: TestClient, ingest_headers: dict[str, str], database: Database
) -> None:
    post_history(client, ingest_headers, dynamic_bert_slower)
    (step,) = regressions(client)
    triage = {"Authorization": f"Bearer {make_token(database, 'triage', name='api')}"}
    body = {"status": "invalid"}
    client.patch(f"/api/v1/regressions/{step['id']}", json=body, headers=triage)

    page.goto("/backtest")
    expect(page.get_by_role("link", name="Sign in").first).to_be_visible()
    page.get_by_role("link", name="Sign in").first.click()
    page.get_by_label("API token").fill(make_token(database, "triage", name="browser"))
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(re.compile(r"/backtest$"))

    form = page.get_by_role("form", name="Backtest")
    form.get_by_label("Thresholds (JSON)").fill('{"suite:torchbench": {"min_rel_change": 0.2')
    form.get_by_role("button", name="Run backtest").click()
    expect(page.get_by_role("alert")).to_contain_text("thresholds: not JSON")

    form = page.get_by_role("form", name="Backtest")
    strict = '{"suite:torchbench": {"min_rel_change": 0.2, "min_rel_floor": 0.2}}'
    form.get_by_label("Thresholds (JSON)").fill(strict)
    form.get_by_label("Model").fill("bert")
    form.get_by_role("button", name="Run backtest").click()
    summary = page.get_by_role("table", name="Backtest summary")
    expect(summary.locator("tr", has_text="Stored now")).to_contain_text("0.00")  # 1 invalid
    expect(summary.locator("tr", has_text="With the proposal")).to_contain_text("no labels")
    changed = page.get_by_role("table", name="Findings that change")
    expect(changed.locator("tbody tr")).to_have_count(1)
    expect(changed).to_contain_text("removed")
    expect(changed).to_contain_text("bert · dynamic · bf16")
    expect(changed).to_contain_text("invalid")
    expect(page.get_by_role("textbox", name="Thresholds (JSON)")).to_have_value(strict)
