"""The dashboard in real headless Chromium: charts render, filters drive the URL and the data,
a triage click persists, uploaded names stay text, and no page logs a console error."""

import re

import pytest
from fastapi.testclient import TestClient
from playwright.sync_api import Page, expect

from app.core.db import Database
from tests.anomalies.test_service import dynamic_bert_slower, post_history
from tests.conftest import make_token
from tests.factories import result, run_payload

pytestmark = pytest.mark.usefixtures("history")
PLOT = ".js-plotly-plot .main-svg"  # plotly's SVG, there once a chart has drawn


@pytest.fixture
def history(client: TestClient, ingest_headers: dict[str, str]) -> list[int]:
    return post_history(client, ingest_headers, dynamic_bert_slower)


def test_overview_shows_the_tables_and_the_base_run_is_in_the_url(page: Page) -> None:
    page.goto("/")
    expect(page.get_by_role("heading", name="Geomean speedup vs eager")).to_be_visible()
    expect(page.locator("table.grid").first).to_be_visible()
    expect(page.get_by_role("link", name=re.compile("Alert group"))).to_be_visible()
    page.get_by_label("Base run").select_option(index=2)
    page.get_by_role("button", name="Show").click()
    expect(page).to_have_url(re.compile(r"base=\d+"))
    chosen = page.get_by_label("Base run").input_value()
    assert f"base={chosen}" in page.url


def test_series_chart_renders_and_the_grouping_follows_the_url(page: Page) -> None:
    page.goto("/series?model=bert&precision=bf16&metric=latency")
    page.wait_for_selector(PLOT)
    legend = page.locator(".legendtext")
    expect(legend).to_contain_text(["default", "dynamic", "eager"])
    page.get_by_label("One line per").select_option("precision")
    page.get_by_role("button", name="Show").click()
    expect(page).to_have_url(re.compile("by=precision"))
    page.wait_for_selector(PLOT)
    expect(page.locator(".legendtext")).to_have_text(["bf16"])


def test_a_triage_click_persists(page: Page, database: Database, client: TestClient) -> None:
    token = make_token(database, "triage", name="browser")
    page.goto("/alerts")
    group = page.locator("article", has_text="Alert group 1")
    # Not signed in: a prompt to sign in, and no controls that would refuse.
    expect(group.get_by_role("button", name="Acknowledge")).to_have_count(0)
    expect(group).to_contain_text("with a triage token to triage")
    group.get_by_role("link", name="Sign in").click()
    page.get_by_label("API token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(re.compile(r"/alerts$"))
    page.wait_for_selector(PLOT)  # the step's chart
    group.get_by_role("button", name="Acknowledge").click()
    expect(page.get_by_role("heading", name=re.compile("Alert group 1"))).to_have_count(0)
    stored = client.get("/api/v1/alert-groups/1").json()
    assert stored["status"] == "acknowledged"
    assert stored["triaged_by"].startswith("browser (token #")
    assert "dashboard session #" in stored["triaged_by"]
    page.goto("/alerts?status=acknowledged")
    expect(page.get_by_role("heading", name=re.compile("Alert group 1"))).to_contain_text(
        "acknowledged"
    )
    expect(page.locator("article", has_text="Alert group 1")).to_contain_text(
        "Last triaged by browser"
    )
    # The token went into the form once: no script can read it, or the session, afterwards.
    assert token not in page.evaluate("JSON.stringify(Object.assign({}, localStorage))")
    assert token not in page.evaluate("document.cookie")
    assert page.evaluate("document.cookie") == ""  # the session cookie is HttpOnly


def test_compare_sorts_by_change_and_draws_the_scatter(page: Page) -> None:
    page.goto("/compare?kind=configs&base_config=eager&new_config=dynamic")
    page.wait_for_selector(PLOT)
    page.get_by_role("button", name="Change dynamic").click()
    cells = page.locator("table.list tbody tr td.cell")  # the change column
    changes = [float(v) for v in cells.evaluate_all("cells => cells.map(c => c.dataset.value)")]
    assert changes == sorted(changes, reverse=True)
    expect(page.get_by_role("link", name="Download CSV")).to_be_visible()


def test_an_uploaded_name_with_html_stays_text(
    page: Page, client: TestClient, ingest_headers: dict[str, str]
) -> None:
    evil = "<img src=x onerror=alert(1)>"
    posted = client.post(
        "/api/v1/runs",
        json=run_payload("evil", [result(model=evil, value=1.0)]),
        headers=ingest_headers,
    )
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: dialogs.append(dialog.message))
    page.goto(f"/runs/{posted.json()['id']}")
    expect(page.get_by_role("link", name=evil)).to_be_visible()
    assert page.locator("img[src=x]").count() == 0
    assert dialogs == []


def test_every_page_is_reachable_by_keyboard(page: Page) -> None:
    page.goto("/")
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    expect(page.locator(":focus")).to_have_text("Overview")
    for name in ("Series", "Compare", "Alerts"):
        page.goto("/")
        page.get_by_role("link", name=name, exact=True).focus()
        page.keyboard.press("Enter")
        expect(page).to_have_url(re.compile(f"/{name.lower()}"))
