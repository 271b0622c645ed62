"""Coverage changes on the dashboard: their own table on the alerts page, not newly failing."""

import re

from fastapi.testclient import TestClient
from playwright.sync_api import Page, expect

from app.core.db import Database
from tests.anomalies.test_coverage import post
from tests.anomalies.test_failures import MODELS
from tests.conftest import make_token

WITHOUT_T5 = tuple(m for m in MODELS if m != "t5")


def mixed_nightly(client: TestClient, headers: dict[str, str]) -> list[int]:
    """Three full nightlies, then one where t5 is gone, vit is new and bert fails (OOM)."""
    runs = [post(client, headers, i) for i in range(3)]
    return [*runs, post(client, headers, 3, (*WITHOUT_T5, "vit"), outcomes={"bert": "oom"})]


def table(page: str, css_class: str) -> str:
    """The HTML of the page's one table of this class."""
    (found,) = re.findall(rf'<table class="list {css_class}".*?</table>', page, re.S)
    return found


def test_coverage_changes_have_their_own_rows_and_words(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    runs = mixed_nightly(client, ingest_headers)
    page = client.get("/alerts").text
    assert "1 failure</span>" in page
    assert "2 coverage changes</span>" in page
    failing = table(page, "failures")
    assert "<tr><td>bert<br>" in failing
    assert "t5" not in failing
    assert "vit" not in failing
    coverage = table(page, "coverage-changes")
    assert "<tr><td>t5<br>" in coverage
    assert "<tr><td>vit<br>" in coverage
    assert "now_fails" not in coverage  # the low-severity tag instead
    assert coverage.count('<span class="tag low"') == 2
    assert (
        f'last reported in <a href="/runs/{runs[2]}">run {runs[2]}</a>, '
        f'missing since <a href="/runs/{runs[3]}">run {runs[3]}</a>'
    ) in coverage
    assert f'new in <a href="/runs/{runs[3]}">run {runs[3]}</a>' in coverage
    assert "reported again" not in coverage
    assert "no longer reported" in coverage
    assert "newly reported" in coverage

    assert (
        "<option selected>coverage</option>"
        in client.get("/alerts", params={"direction": "coverage"}).text
    )
    assert "Alert group 1" in client.get("/alerts", params={"direction": "coverage"}).text

    runs.append(post(client, ingest_headers, 4, (*MODELS, "vit")))  # t5 is back
    coverage = table(client.get("/alerts", params={"group": "1"}).text, "coverage-changes")
    again = f'reported again in <a href="/runs/{runs[4]}">run {runs[4]}</a>'
    assert coverage.count(again) == 2  # t5 back, and vit reported a second time


def test_a_group_of_coverage_changes_alone_is_filtered_by_kind(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    for index in range(3):
        post(client, ingest_headers, index)
    post(client, ingest_headers, 3, WITHOUT_T5)
    assert "Alert group 1" in client.get("/alerts", params={"direction": "coverage"}).text
    for kind in ("failure", "regression"):
        page = client.get("/alerts", params={"direction": kind}).text
        assert "No alert groups match" in page
    assert 'class="list failures"' not in client.get("/alerts").text


def test_the_overview_does_not_list_coverage_changes_as_newly_failing(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    mixed_nightly(client, ingest_headers)
    page = client.get("/", params={"machine": "h100-8"}).text
    assert "1 case that passed before" in page
    newly = page[page.index('id="newly-failing"') : page.index("</section>")]
    assert ">bert</a>" in newly
    assert ">t5</a>" not in newly
    assert ">vit</a>" not in newly
    assert "2 coverage changes</span>" in page  # the open group says it


def test_the_overview_has_no_newly_failing_list_for_coverage_alone(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    for index in range(3):
        post(client, ingest_headers, index)
    post(client, ingest_headers, 3, (*WITHOUT_T5, "vit"))
    page = client.get("/", params={"machine": "h100-8"}).text
    assert "Newly failing" not in page


def test_a_coverage_change_is_triaged_from_the_page(
    page: Page, client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    mixed_nightly(client, ingest_headers)
    (t5,) = client.get("/api/v1/failures", params={"failure": "removed"}).json()["items"]
    token = make_token(database, "triage", name="browser")
    page.goto("/login?next=/alerts")
    page.get_by_label("API token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(re.compile(r"/alerts$"))
    page.wait_for_selector("table.coverage-changes button.sort")  # app.js has set the page up
    form = page.get_by_role("form", name=f"Triage coverage change {t5['id']}")
    form.get_by_label(f"Status of coverage change {t5['id']}").select_option("expected")
    with page.expect_event("load"):  # saved, then reloaded
        form.get_by_role("button", name="Set").click()
    stored = client.get(f"/api/v1/failures/{t5['id']}").json()
    assert (stored["status"], stored["severity"]) == ("expected", "low")
