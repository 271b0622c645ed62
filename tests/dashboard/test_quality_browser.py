"""The alert quality page in Chromium: its four plots draw."""

from fastapi.testclient import TestClient
from playwright.sync_api import Page, expect

from app.core.db import Database
from tests.anomalies.test_quality import history_of_triage


def test_the_quality_page_draws_its_plots(
    page: Page, client: TestClient, database: Database
) -> None:
    history_of_triage(client, database)
    page.goto("/quality?weeks=4")
    for name in (
        "Findings per week, by kind",
        "Time to triage and to fix",
        "Localization outcomes",
    ):
        expect(page.get_by_role("img", name=name).locator(".main-svg").first).to_be_visible()
    bars = page.locator("[data-figure='per-week-figure'] .trace.bars path")
    expect(bars.first).to_be_attached()
    heights = bars.evaluate_all("ps => ps.map(p => p.getBoundingClientRect().height)")
    assert max(heights) > 10  # the weeks that found something stand
    expect(page.get_by_role("link", name="1 alert group overdue")).to_be_visible()
