"""Failing cases on the alerts page: the table, escaped reasons, run links, badges, triage."""

import re

from fastapi.testclient import TestClient
from markupsafe import escape
from playwright.sync_api import Page, expect

from app.core.db import Database
from tests.anomalies.test_failure_triage import CRAFTED, post_nightly, three_start_failing
from tests.conftest import make_token, sign_in


def failures_by_model(client: TestClient) -> dict[str, dict[str, object]]:
    return {f["model"]: f for f in client.get("/api/v1/failures").json()["items"]}


def test_a_group_of_failures_shows_its_cases_reasons_runs_and_actions(
    client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    runs = three_start_failing(client, ingest_headers)
    sign_in(client, database, "triage")  # the actions are a triager's
    page = client.get("/alerts")  # "new" by default: the group has failures alone
    assert page.status_code == 200
    text = page.text
    assert "Alert group 1" in text
    assert "3 failures" in text  # the header counts them
    for model in ("alexnet", "bert", "t5"):
        assert re.search(rf"<tr><td>(<input [^>]*> )?{model}<br>", text), model
    assert "resnet50" not in text  # still passing
    assert "CUDA out of memory" in text
    assert "accuracy: fail_accuracy" in text
    assert CRAFTED not in text  # the reason is text, not markup
    assert str(escape(CRAFTED)) in text  # as Jinja escapes it
    assert f'last passing <a href="/runs/{runs[3]}">run {runs[3]}</a>' in text
    assert f'first failing <a href="/runs/{runs[4]}">run {runs[4]}</a>' in text
    assert "passing again since" not in text
    for failure in failures_by_model(client).values():
        assert f'data-endpoint="/api/v1/failures/{failure["id"]}"' in text
    assert 'data-endpoint="/api/v1/alert-groups/1"' in text  # the group's actions too
    assert "data-figure" not in text  # no step, no chart

    assert "Alert group 1" in client.get("/alerts", params={"direction": "failure"}).text
    assert "No alert groups match" in client.get("/alerts", params={"direction": "regression"}).text


def test_ended_and_flaky_failures_are_marked(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    runs = three_start_failing(client, ingest_headers)
    runs.append(post_nightly(client, ingest_headers, 5, {"bert": "accuracy"}))
    text = client.get("/alerts").text
    ended = f'passing again since <a href="/runs/{runs[5]}">run {runs[5]}</a>'
    assert text.count(ended) == 2  # alexnet and t5
    assert ">flaky</span>" not in text
    # alexnet fails again and then flips back and forth: reported once more, as flaky
    for index, outcome in enumerate(["oom", "pass", "oom", "pass", "oom"], start=6):
        runs.append(post_nightly(client, ingest_headers, index, {"alexnet": outcome}))
    flaky = client.get("/api/v1/failures", params={"flaky": "true"}).json()["items"]
    assert [f["model"] for f in flaky] == ["alexnet"]
    page = client.get("/alerts", params={"group": str(flaky[0]["group_id"])}).text
    assert ">flaky</span>" in page


def test_a_failure_is_triaged_from_the_page(
    page: Page, client: TestClient, database: Database, ingest_headers: dict[str, str]
) -> None:
    three_start_failing(client, ingest_headers)
    bert = failures_by_model(client)["bert"]
    token = make_token(database, "triage", name="browser")
    page.goto("/login?next=/alerts")
    page.get_by_label("API token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(re.compile(r"/alerts$"))
    page.wait_for_selector("table.failures button.sort")  # app.js has set the page up
    form = page.get_by_role("form", name=f"Triage failure {bert['id']}")
    form.get_by_label(f"Status of failure {bert['id']}").select_option("invalid")
    with page.expect_event("load"):  # saved, then reloaded
        form.get_by_role("button", name="Set").click()
    reloaded = page.get_by_role("form", name=f"Triage failure {bert['id']}")
    expect(reloaded.get_by_label(f"Status of failure {bert['id']}")).to_have_value("invalid")
    stored = client.get(f"/api/v1/failures/{bert['id']}").json()
    assert stored["status"] == "invalid"
    assert "dashboard session #" in stored["triaged_by"]
    assert client.get("/api/v1/alert-groups/1").json()["status"] == "new"  # two still new
