"""The subscriptions and silences pages.

Admins only for subscriptions, ``triage`` for silences, CSRF and the posting site checked on
every form, stored text rendered as text; and in headless Chromium against a real local
webhook receiver: a subscription made through the form, a test notice delivered, paused, a
silence added and expired. ``BENCHWATCH_SCREENSHOTS=1`` also retakes
docs/screenshots/subscriptions.png and subscription-log.png.
"""

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from playwright.sync_api import Page, expect

from app.core.config import Settings
from app.core.db import Database
from app.main import create_app
from app.notifications.models import Subscription
from tests.conftest import make_token, sign_in
from tests.dashboard.conftest import VIEWPORT
from tests.notifications.receiver import receiving

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
EVIL = "<script>alert(1)</script>"
WEBHOOK = [{"kind": "webhook", "url": "https://hooks.example/bw"}]


@pytest.fixture
def live_settings(settings: Settings) -> Settings:
    """Webhooks may go to this machine (the local receiver); no timed sweeps."""
    return settings.model_copy(
        update={"RECEIVER_ALLOW": "127.0.0.1", "NOTIFY_SWEEP_S": 0.0, "DETECTION_SWEEP_S": 0.0}
    )


@pytest.fixture
def web(live_settings: Settings) -> Iterator[TestClient]:
    """A browser-like client of the app that does not follow redirects."""
    application = create_app(live_settings)
    with TestClient(application, follow_redirects=False) as client:
        yield client
    application.state.database.dispose()


def form(csrf: str, **fields: str) -> dict[str, str]:
    return {
        "csrf": csrf,
        "name": "bert owners",
        "owner": "pt2@example.com",
        "match": '{"model": "bert*"}',
        "exclude": "[]",
        "receivers": '[{"kind": "webhook", "url": "https://hooks.example/bw"}]',
        "when": "immediate",
        **fields,
    }


def subscribe(client: TestClient, database: Database, **fields: Any) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {make_token(database, 'admin', name='api')}"}
    body = {"name": "bert owners", "receivers": WEBHOOK, **fields}
    answer = client.post("/api/v1/subscriptions", json=body, headers=headers)
    assert answer.status_code == 201, answer.text
    created: dict[str, Any] = answer.json()
    return created


def api(database: Database) -> dict[str, str]:
    return {"Authorization": f"Bearer {make_token(database, 'admin', name='reader')}"}


def silence_form(csrf: str) -> dict[str, str]:
    return {"csrf": csrf, "matchers": '{"machine": "h100"}', "hours": "2", "comment": "upgrade"}


def test_signed_out_the_pages_ask_to_sign_in_and_forms_change_nothing(
    web: TestClient, database: Database
) -> None:
    subscription = subscribe(web, database)
    for path in ("/subscriptions", f"/subscriptions/{subscription['id']}"):
        answer = web.get(path)
        assert answer.status_code == 303
        assert answer.headers["location"] == "/login?next=" + path.replace("/", "%2F")
    posts = {
        "/subscriptions": form(""),
        f"/subscriptions/{subscription['id']}/delete": {"confirm": "yes"},
        f"/subscriptions/{subscription['id']}/pause": {"paused": "true"},
        "/silences": silence_form(""),
    }
    for path, data in posts.items():
        answer = web.post(path, data=data)
        assert answer.status_code == 403, path
        assert "Sign in with a" in answer.text
    assert web.get("/silences").status_code == 200  # silences are read by every reader
    stored = web.get(f"/api/v1/subscriptions/{subscription['id']}", headers=api(database))
    assert (stored.json()["paused"], stored.json()["revision"]) == (False, 1)
    assert web.get("/api/v1/silences").json()["total"] == 0


def test_a_session_without_admin_sees_no_subscription(web: TestClient, database: Database) -> None:
    subscription = subscribe(web, database, owner="secret-owner")
    csrf = sign_in(web, database, "triage")
    for path in ("/subscriptions", f"/subscriptions/{subscription['id']}"):
        answer = web.get(path)
        assert answer.status_code == 403
        assert "lacks the scope &#39;admin&#39;" in answer.text
        assert "secret-owner" not in answer.text
        assert "whsec_" not in answer.text
    assert ">Subscriptions</a>" in web.get("/").text  # the nav shows the page to those signed in
    answer = web.post("/subscriptions", data=form(csrf, name="by triage"))
    assert answer.status_code == 403
    answer = web.post(f"/subscriptions/{subscription['id']}/test", data={"csrf": csrf})
    assert answer.status_code == 403
    # ... but triage may silence
    answer = web.post("/silences", data=silence_form(csrf))
    assert answer.status_code == 303
    assert answer.headers["location"] == "/silences?done=silenced"  # where the form said
    assert "triage (token #" in web.get("/silences").text


def test_a_read_session_may_not_silence(web: TestClient, database: Database) -> None:
    csrf = sign_in(web, database, "read")
    assert web.post("/silences", data=silence_form(csrf)).status_code == 403
    page = web.get("/silences").text
    assert "needs the <code>triage</code> scope" in page
    assert 'action="/silences"' not in page


def test_every_form_needs_the_csrf_value_and_this_site(web: TestClient, database: Database) -> None:
    csrf = sign_in(web, database, "admin")
    assert web.post("/subscriptions", data=form("")).status_code == 403
    assert web.post("/subscriptions", data=form("x" * 64)).status_code == 403
    for headers in ({"Sec-Fetch-Site": "cross-site"}, {"Origin": "https://evil.example"}):
        answer = web.post("/subscriptions", data=form(csrf), headers=headers)
        assert answer.status_code == 403
        assert "another site posted it" in answer.text
    answer = web.post("/silences", data=silence_form(csrf), headers={"Sec-Fetch-Site": "same-site"})
    assert answer.status_code == 403
    assert web.get("/api/v1/subscriptions", headers=api(database)).json()["total"] == 0
    answer = web.post("/subscriptions", data=form(csrf), headers={"Sec-Fetch-Site": "same-origin"})
    assert answer.status_code == 200  # the new subscription's page, its secret in full
    assert "Subscription created." in answer.text
    made = web.get("/api/v1/subscriptions", headers=api(database)).json()["items"][0]
    secret = re.search(r'<code class="secret">(whsec_[A-Za-z0-9+/=]{30,})</code>', answer.text)
    assert secret is not None
    assert secret.group(1)[-4:] == made["receivers"][0]["secrets"][0][-4:]
    assert secret.group(1) not in web.get(f"/subscriptions/{made['id']}").text  # then masked


def test_a_refused_form_comes_back_as_typed_with_each_problem_where_it_is(
    web: TestClient, database: Database
) -> None:
    csrf = sign_in(web, database, "admin")
    typed = '[{"kind": "webhook", "url": "https://hooks.example/bw"'
    answer = web.post("/subscriptions", data=form(csrf, receivers=typed, name=""))
    assert answer.status_code == 200  # the form again (a browser logs a 4xx as an error)
    assert "Not saved: 2 problems" in answer.text
    assert "<code>name</code>: Value should have at least 1 item" in answer.text
    assert "receivers (line 1, column 55)" in answer.text
    assert "not JSON" in answer.text
    assert typed.replace('"', "&#34;") in answer.text  # kept as typed
    bad = '[{"kind": "webhook", "url": "ftp://x"}, {"kind": "email", "to": ["nobody"]}]'
    answer = web.post(
        "/subscriptions",
        data=form(csrf, receivers=bad, match='{"min_rel_change": -1}', when="digest"),
    )
    for where in ("receivers[0].webhook.url", "receivers[1].email.to[0]", "match.min_rel_change"):
        assert f"<code>{where}</code>" in answer.text, where
    assert "when.digest.digest_hours" in answer.text  # digest without hours
    private = '[{"kind": "webhook", "url": "http://10.1.2.3/hook"}]'
    answer = web.post("/subscriptions", data=form(csrf, receivers=private))
    assert "<code>receivers[0].url</code>" in answer.text
    assert "private" in answer.text
    subscribe(web, database)
    answer = web.post("/subscriptions", data=form(csrf))
    assert "<code>name</code>: taken by another subscription" in answer.text
    assert web.get("/api/v1/subscriptions", headers=api(database)).json()["total"] == 1


def test_a_refused_silence_shows_every_problem(web: TestClient, database: Database) -> None:
    csrf = sign_in(web, database, "triage")
    answer = web.post("/silences", data={"csrf": csrf, "hours": "9999", "comment": "typed"})
    assert answer.status_code == 200
    assert "<code>matchers</code>: give at least one matcher" in answer.text
    assert "<code>hours</code>: a number of hours above 0, at most 2160" in answer.text
    assert 'value="typed"' in answer.text
    bad = {"csrf": csrf, "matchers": '{"machin": "h100"}', "hours": "2", "comment": ""}
    answer = web.post("/silences", data=bad)
    assert "<code>matchers.machin</code>: Extra inputs are not permitted" in answer.text
    assert "<code>comment</code>" in answer.text
    assert web.get("/api/v1/silences").json()["total"] == 0


def test_edit_pause_redeliver_and_delete(web: TestClient, database: Database) -> None:
    receivers = [*WEBHOOK, {"kind": "feed"}]
    subscription = subscribe(web, database, match={"model": "bert"}, receivers=receivers)
    one = f"/subscriptions/{subscription['id']}"
    csrf = sign_in(web, database, "admin")
    page = web.get(one).text
    feed = subscription["receivers"][1]["token"]
    secret = subscription["receivers"][0]["secrets"][0]
    assert secret not in page  # not even an admin reads a secret after the answer that made it
    assert f"whsec_…{secret[-4:]}" in page  # masked, to tell secrets apart
    assert feed not in page  # nor the feed's token
    form_part = page.split("Edit</h2>")[1]
    assert "whsec_" not in form_part  # ... nor in the form: left out, they are kept
    assert feed not in form_part
    assert "{&#34;kind&#34;: &#34;feed&#34;}" in form_part.replace("\n", "").replace("  ", "")
    receivers_text = json.dumps(receivers)
    edited = form(csrf, owner="new owner", match='{"model": "bert"}', receivers=receivers_text)
    answer = web.post(one, data=edited)
    assert (answer.status_code, answer.headers["location"]) == (303, f"{one}?done=saved")
    stored = web.get(f"/api/v1{one}", headers=api(database)).json()
    assert (stored["owner"], stored["revision"]) == ("new owner", 2)
    assert stored["receivers"][0]["secrets"] == [f"whsec_…{secret[-4:]}"]  # secret kept
    assert web.post(f"{one}/pause", data={"csrf": csrf, "paused": "true"}).status_code == 303
    assert web.get(f"/api/v1{one}", headers=api(database)).json()["paused"] is True
    assert "Resume</button>" in web.get(one).text
    answer = web.post(f"{one}/test", data={"csrf": csrf})
    assert answer.status_code == 303
    found = re.search(r"notice=(\d+)", answer.headers["location"])
    assert found
    notice = int(found.group(1))
    log = web.get(f"/api/v1{one}/notices", headers=api(database)).json()["items"]
    assert log[0]["id"] == notice
    delivery = log[0]["deliveries"][0]["id"]
    elsewhere = subscribe(web, database, name="other")
    wrong = f"/subscriptions/{elsewhere['id']}/deliveries/{delivery}/redeliver"
    assert web.post(wrong, data={"csrf": csrf}).status_code == 404
    answer = web.post(f"{one}/deliveries/{delivery}/redeliver", data={"csrf": csrf})
    assert answer.status_code == 303
    assert f"delivery={delivery}" in answer.headers["location"]
    answer = web.post(f"{one}/delete", data={"csrf": csrf})  # the box not ticked
    assert answer.status_code == 200
    assert "tick the box to delete" in answer.text
    answer = web.post(f"{one}/delete", data={"csrf": csrf, "confirm": "yes"})
    assert answer.headers["location"] == "/subscriptions?done=deleted"
    assert web.get(one).status_code == 404


def test_stored_text_is_escaped_everywhere(web: TestClient, database: Database) -> None:
    subscription = subscribe(
        web,
        database,
        name=EVIL,
        owner='"><img src=x onerror=alert(2)>',
        match={"model": EVIL},
    )
    csrf = sign_in(web, database, "admin")
    web.post("/silences", data={**silence_form(csrf), "comment": EVIL})
    for path in ("/subscriptions", f"/subscriptions/{subscription['id']}", "/silences"):
        text = web.get(path).text
        assert "<script>alert" not in text, path
        assert "<img src=x" not in text, path
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text, path
        for tag in re.findall(r"<script\b[^>]*>", text):  # the page policy runs no inline script
            assert "src=" in tag, (path, tag)
        tags = [re.sub(r'"[^"]*"', '""', t) for t in re.findall(r"<[^>]+>", text)]  # no values
        handlers = [t for t in tags if re.search(r"\son[a-z]+=", t)]
        assert handlers == [], path


def test_a_subscription_of_the_file_is_read_only(web: TestClient, database: Database) -> None:
    subscription = subscribe(web, database)
    with database.session_scope() as session:
        row = session.get(Subscription, subscription["id"])
        assert row is not None
        row.source = "file"
    csrf = sign_in(web, database, "admin")
    one = f"/subscriptions/{subscription['id']}"
    page = web.get(one).text
    assert "Read-only here" in page
    assert f'action="{one}/pause"' not in page
    assert 'aria-label="Edit subscription"' not in page
    assert "Send a test notice" in page
    assert web.post(f"{one}/pause", data={"csrf": csrf, "paused": "true"}).status_code == 409


def test_in_chromium_subscribe_test_pause_and_silence(
    page: Page, database: Database, live_server: str
) -> None:
    token = make_token(database, "admin", name="admin")
    with receiving() as hook:
        page.goto("/subscriptions")
        page.get_by_label("API token").fill(token)
        page.get_by_role("button", name="Sign in").click()
        expect(page).to_have_url(re.compile(r"/subscriptions$"))
        new = page.get_by_role("form", name="New subscription")
        new.get_by_label("Name").fill("bert owners")
        new.get_by_label("Owner").fill("pt2-team@example.com")
        new.get_by_label("Match rules (JSON)").fill('{"model": "bert*", "min_rel_change": 0.05}')
        receivers = f'[{{"kind": "webhook", "url": "{hook.url}"}}]'
        new.get_by_label("Receivers (JSON list)").fill(receivers)
        new.get_by_role("button", name="Create subscription").click()
        expect(page.get_by_role("status")).to_have_text("Subscription created.")

        page.get_by_role("navigation").get_by_role("link", name="Subscriptions").click()
        row = page.get_by_role("table", name="Subscriptions").locator("tbody tr")
        expect(row).to_contain_text("pt2-team@example.com")
        expect(row).to_contain_text("model bert* · change ≥ 5%")
        expect(row).to_contain_text(f"webhook {hook.url.removesuffix('/hook')}/…")
        expect(row).to_contain_text("immediately")
        row.get_by_role("link", name="bert owners").click()

        page.get_by_role("button", name="Send a test notice").click()
        log = page.locator("article.notice.highlight")
        delivery = log.locator("tbody tr").first
        expect(delivery).to_contain_text("delivered")  # the page reloads until then
        (received,) = hook.wait_for(1)
        assert received.json()["event"] == "test"
        expect(log).to_contain_text(received.headers["webhook-id"])

        delivery.get_by_role("button", name="Redeliver").click()
        again = page.locator("tr.highlight")
        expect(again).to_contain_text("delivered")
        expect(again.locator("td").nth(3)).to_have_text("2")  # attempts
        assert [r.headers["webhook-id"] for r in hook.wait_for(2)] == [
            received.headers["webhook-id"]
        ] * 2
        attempts = page.get_by_role("table", name=re.compile("Attempts of delivery"))
        expect(attempts.locator("tbody tr")).to_have_count(2)  # open: the delivery pointed out
        expect(attempts.locator("tbody tr").first).to_contain_text("200")
        screenshot(page, database, "subscription-log")

    page.get_by_role("navigation").get_by_role("link", name="Subscriptions").click()
    silence = page.get_by_role("form", name="New silence")
    silence.get_by_label("Matchers (JSON)").fill('{"machine": "demo-h100"}')
    silence.get_by_label("Ends in (hours)").fill("4")
    silence.get_by_label("Comment").fill("h100 in maintenance")
    silence.get_by_role("button", name="Add silence").click()
    expect(page).to_have_url(re.compile(r"/subscriptions\?done=silenced#silences$"))
    active = page.get_by_role("region", name="Active and pending silences")
    expect(active).to_contain_text("machine demo-h100")
    expect(active).to_contain_text("admin (token #")
    expect(page.get_by_role("table", name="Subscriptions")).to_contain_text("1 delivered")
    screenshot(page, database, "subscriptions")
    active.get_by_role("button", name="Expire now").click()
    expect(page.get_by_text("No silence is active or pending.")).to_be_visible()
    page.get_by_text("Ended last (1)").click()
    expect(page.get_by_role("region", name="Expired silences")).to_contain_text(
        "h100 in maintenance"
    )

    page.get_by_role("link", name="bert owners").click()
    page.get_by_role("button", name="Pause").click()
    expect(page.get_by_role("status")).to_contain_text("Paused")
    expect(page.get_by_role("button", name="Resume")).to_be_visible()
    expect(page.get_by_role("heading", name=re.compile("bert owners"))).to_contain_text("paused")


def screenshot(page: Page, database: Database, name: str) -> None:
    """With BENCHWATCH_SCREENSHOTS set, the page as docs/screenshots/<name>.png (one dialect)."""
    if os.environ.get("BENCHWATCH_SCREENSHOTS") and database.url.startswith("sqlite"):
        page.set_viewport_size({"width": 1280, "height": 900})
        page.screenshot(path=SCREENSHOTS / f"{name}.png", full_page=True)
        page.set_viewport_size(VIEWPORT)
