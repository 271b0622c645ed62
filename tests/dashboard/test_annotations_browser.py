"""Annotations in headless Chromium: one added through the /annotations form is drawn on
the series chart, its text on hover, and listed beside the alert group in whose window it is."""

import re

from fastapi.testclient import TestClient
from playwright.sync_api import Page, expect

from app.core.db import Database
from tests.anomalies.test_service import dynamic_bert_slower, post_history
from tests.conftest import make_token

PLOT = ".js-plotly-plot .main-svg"


def test_an_annotation_added_in_the_page_shows_on_the_series_chart(
    page: Page, client: TestClient, ingest_headers: dict[str, str], database: Database
) -> None:
    post_history(client, ingest_headers, dynamic_bert_slower)
    outage = {
        "at": "2026-01-03T00:00:00Z",
        "ends_at": "2026-01-04T00:00:00Z",
        "text": "<img src=x onerror=alert(1)> lab outage",
    }
    triage = {"Authorization": f"Bearer {make_token(database, 'triage', name='api')}"}
    assert client.post("/api/v1/annotations", json=outage, headers=triage).status_code == 201
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: dialogs.append(dialog.message))

    token = make_token(database, "triage", name="browser")
    page.goto("/annotations")
    page.get_by_role("link", name="Sign in").first.click()
    page.get_by_label("API token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(re.compile(r"/annotations$"))
    form = page.get_by_role("form", name="New annotation")
    form.get_by_label("At (UTC)").fill("2026-01-13T06:00")
    form.get_by_label("Machine").select_option("h100-8")
    form.get_by_label("Text").fill("driver 550 upgrade")
    form.get_by_role("button", name="Add annotation").click()
    expect(page.get_by_role("status")).to_have_text("Annotation added.")
    expect(page.get_by_role("table", name="Annotations")).to_contain_text("driver 550 upgrade")

    page.goto("/series?model=bert&precision=bf16&metric=latency")
    page.wait_for_selector(PLOT)
    chart = page.locator("#series-chart")
    # A dotted line for the event, a shaded band for the outage.
    expect(chart.locator(".shapelayer path")).to_have_count(2)
    labels = chart.locator(".annotation-text")
    expect(labels.filter(has_text="driver 550 upgrade")).to_have_count(1)
    label = chart.locator(".annotation").filter(has_text="driver 550 upgrade")
    label.hover()
    expect(chart.locator(".hoverlayer")).to_contain_text("h100-8")
    expect(labels.filter(has_text="<img src=x")).to_have_count(1)  # drawn as text
    assert page.locator("img[src=x]").count() == 0

    page.goto("/alerts")
    group = page.locator("article", has_text="Alert group 1")
    expect(group.get_by_role("complementary")).to_contain_text("driver 550 upgrade")
    expect(group.get_by_role("complementary")).not_to_contain_text("lab outage")
    assert dialogs == []
