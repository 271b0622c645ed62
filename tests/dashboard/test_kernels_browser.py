"""The kernel diff page in headless Chromium: reached from the alert, its waterfall draws,
its table sorts; no console error; a kernel named with HTML stays text.
``BENCHWATCH_SCREENSHOTS=1`` also retakes docs/screenshots/kernels.png."""

import re

from fastapi.testclient import TestClient
from playwright.sync_api import Page, expect

from app.core.db import Database
from tests.dashboard.test_subscriptions_page import screenshot
from tests.kernels.test_hints import post_profiled_history
from tests.kernels.test_profiles_api import profile, run_with

PLOT = ".js-plotly-plot .main-svg"


def test_a_regressions_kernels_from_its_alert(
    page: Page, client: TestClient, ingest_headers: dict[str, str], database: Database
) -> None:
    post_profiled_history(client, ingest_headers)
    page.goto("/alerts")
    page.get_by_role("link", name="kernels", exact=True).click()
    expect(page).to_have_url(re.compile(r"/regressions/\d+/kernels$"))
    expect(page.locator("#kernel-step")).to_contain_text(
        "78% of the step is in `fused_softmax` (+130%)"
    )
    page.wait_for_selector(PLOT)
    # the two kernels, the other kernels, outside kernels, the step
    expect(page.locator(".js-plotly-plot .waterfalllayer .point")).to_have_count(5)
    rows = page.get_by_role("table", name="Kernels").locator("tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.first).to_contain_text("fused_softmax")
    page.get_by_role("button", name="Share of the step").click()
    shares = page.locator("tbody tr td:nth-child(7)").evaluate_all(
        "cells => cells.map(c => parseFloat(c.dataset.value))"
    )
    assert shares in (sorted(shares), sorted(shares, reverse=True))
    screenshot(page, database, "kernels")


def test_a_kernel_named_with_html_stays_text(
    page: Page, client: TestClient, ingest_headers: dict[str, str]
) -> None:
    evil = "<img src=x onerror=alert(1)>"
    ids = []
    for key, wall in (("base", 100.0), ("head", 150.0)):
        payload = run_with(key, profile(wall, **{evil: wall / 2}))
        ids.append(client.post("/api/v1/runs", json=payload, headers=ingest_headers).json()["id"])
    (read,) = client.get(f"/api/v1/runs/{ids[0]}/kernels").json()["items"]
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: dialogs.append(dialog.message))
    page.goto(f"/kernels?base_run={ids[0]}&head_run={ids[1]}&benchmark={read['benchmark']['id']}")
    page.wait_for_selector(PLOT)
    expect(page.get_by_role("table", name="Kernels")).to_contain_text(evil)
    assert page.locator("img[src=x]").count() == 0
    assert dialogs == []
