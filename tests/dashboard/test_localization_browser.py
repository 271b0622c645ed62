"""A finished localization in headless Chromium (issue 28 point 6): from its alert group on the
alerts page to its page, whose probe chart draws; then a triage session asks for another with
the "Localize" button. No console error. ``BENCHWATCH_SCREENSHOTS=1`` also retakes
docs/screenshots/localization.png."""

import re

from fastapi.testclient import TestClient
from playwright.sync_api import Page, expect

from app.core.db import Database
from tests.conftest import make_token
from tests.dashboard.test_localization_page import BAD, COMMIT, GOOD, finished, worker_regression
from tests.dashboard.test_subscriptions_page import screenshot

PLOT = ".js-plotly-plot .main-svg"
DRAWN = """() => document.querySelector('[data-figure="probe-chart"]').data
    .map((trace) => [trace.name, trace.x.length, trace.y[0]])"""


def test_from_the_alerts_page_to_a_finished_localization_and_another(
    page: Page, client: TestClient, database: Database
) -> None:
    step = worker_regression(client, database)
    localization_id = finished(database, step["id"])

    page.goto("/alerts")
    group = page.locator(f"#group-{step['group_id']}")
    expect(group.get_by_text("culprit found").first).to_be_visible()
    group.get_by_role("link", name=f"Localization {localization_id}", exact=True).click()
    expect(page).to_have_url(re.compile(f"/localizations/{localization_id}$"))
    expect(page.locator("#localization-state")).to_have_text("culprit found")
    expect(page.get_by_role("heading", name="Culprit: commit")).to_be_visible()
    commit = page.get_by_role("link", name="the commit")
    expect(commit).to_have_attribute("href", f"https://github.com/pytorch/pytorch/commit/{COMMIT}")
    page.wait_for_selector(PLOT)
    drawn = page.evaluate(DRAWN)
    assert drawn == [
        ["reference", 20, GOOD],  # the two references' samples, then the probes'
        ["bad", 20, BAD],
        ["good reference median", 2, GOOD],
        ["bad reference median", 2, BAD],
    ]
    expect(page.locator(".legendtext", has_text="bad reference median")).to_be_visible()
    expect(page.get_by_role("table", name="Probes").locator("tbody tr")).to_have_count(4)
    screenshot(page, database, "localization")

    # Signed in with triage, the finished one's finding may be localized again.
    page.goto(f"/alerts?group={step['group_id']}")
    page.get_by_role("link", name="Sign in").first.click()
    page.get_by_label("API token").fill(make_token(database, "triage", name="on-call"))
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(re.compile(rf"/alerts\?group={step['group_id']}$"))
    page.get_by_role("form", name=f"Localize regression {step['id']}").get_by_role(
        "button", name="Localize"
    ).click()
    expect(page).to_have_url(re.compile(r"/localizations/\d+\?done=queued$"))
    assert f"/localizations/{localization_id}?" not in page.url
    expect(page.get_by_role("status")).to_contain_text("Queued for the machine's worker")
    expect(page.locator("#localization-state")).to_have_text("queued")
    page.goto(f"/alerts?group={step['group_id']}")
    expect(page.get_by_role("form", name=f"Localize regression {step['id']}")).to_have_count(0)
