"""The verdicts page in headless Chromium: reached from the run page, its chart draws, its
tables sort and the passes open; no console error."""

import re

from fastapi.testclient import TestClient
from playwright.sync_api import Page, expect

from tests.anomalies.test_service import post_history
from tests.dashboard.test_verdicts_page import MAIN_RUNS, post, pr_payload

PLOT = ".js-plotly-plot .main-svg"


def test_a_pull_requests_verdicts_from_its_run_page(
    page: Page, client: TestClient, ingest_headers: dict[str, str]
) -> None:
    post_history(client, ingest_headers, runs=range(MAIN_RUNS))
    changes = {("bert", "eager"): 12.0, ("resnet50", "default"): 16.0}
    run_id = post(client, ingest_headers, pr_payload(MAIN_RUNS, changes))

    page.goto(f"/runs/{run_id}")
    page.get_by_role("link", name="Verdicts against nightly").click()
    expect(page).to_have_url(re.compile(f"/runs/{run_id}/verdicts$"))
    page.wait_for_selector(PLOT)
    expect(page.locator(".js-plotly-plot")).to_have_count(2)  # the regression, the improvement
    expect(page.locator(".legendtext").first).to_be_visible()
    expect(page.locator(".legendtext", has_text="feature-x (this run)")).to_have_count(2)
    expect(page.get_by_role("link", name="1 regression", exact=True)).to_be_visible()

    passes = page.locator('table[data-verdict="pass"]')
    expect(passes).to_be_hidden()  # collapsed
    page.get_by_text(re.compile(r"Show \d+ of \d+ passes")).click()
    expect(passes).to_be_visible()
    passes.get_by_role("button", name="Change").click()
    cells = passes.locator("tbody tr td:nth-child(5)")
    changes_shown = cells.evaluate_all("cells => cells.map(c => parseFloat(c.dataset.value))")
    assert changes_shown == sorted(changes_shown, reverse=True)

    page.get_by_role("link", name="these verdicts as JSON").click()
    expect(page).to_have_url(re.compile(f"/api/v1/runs/{run_id}/verdicts$"))


def test_a_branch_named_with_html_stays_text_in_the_charts(
    page: Page, client: TestClient, ingest_headers: dict[str, str]
) -> None:
    evil = "<img src=x onerror=alert(1)>"
    post_history(client, ingest_headers, runs=range(MAIN_RUNS))
    payload = pr_payload(MAIN_RUNS, {("bert", "eager"): 12.0})
    payload.update(branch=evil, commit=evil)
    run_id = post(client, ingest_headers, payload)
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: dialogs.append(dialog.message))
    page.goto(f"/runs/{run_id}/verdicts")
    page.wait_for_selector(PLOT)
    expect(page.locator(".legendtext", has_text=f"{evil} (this run)")).to_have_count(1)
    assert page.locator("img[src=x]").count() == 0
    assert dialogs == []
