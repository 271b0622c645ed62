"""A private server's dashboard (``BENCHWATCH_PUBLIC_READ=false``): sign in with a token."""

import re
from collections.abc import Iterator
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from playwright.sync_api import Page, expect

from app.core.config import Settings
from app.core.db import Database
from app.main import create_app
from app.tokens.auth import SIGN_IN_COOKIE
from app.tokens.service import revoke_token
from tests.conftest import make_token
from tests.factories import run_payload


@pytest.fixture
def live_settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"PUBLIC_READ": False})


@pytest.fixture
def private(live_settings: Settings) -> Iterator[TestClient]:
    """A client of the private app that does not follow redirects."""
    application = create_app(live_settings)
    with TestClient(application, follow_redirects=False) as client:
        yield client
    application.state.database.dispose()


def sign_in(client: TestClient, token: str, next: str = "/") -> None:
    answer = client.post("/login", data={"token": token, "next": next})
    assert answer.status_code == 303, answer.text


def csrf_of(client: TestClient, path: str = "/") -> str:
    """The CSRF value a signed-in page carries."""
    found = re.search(r'<meta name="csrf-token" content="([^"]+)">', client.get(path).text)
    assert found, "the page carries no CSRF value: not signed in?"
    return found.group(1)


@pytest.mark.parametrize("path", ["/", "/series?model=bert&metric=latency", "/runs/1"])
def test_a_page_sends_a_browser_without_a_token_to_sign_in(private: TestClient, path: str) -> None:
    answer = private.get(path)
    assert answer.status_code == 303
    assert answer.headers["location"] == f"/login?next={quote(path, safe='')}"
    form = private.get(answer.headers["location"])
    assert form.status_code == 200
    assert 'type="password"' in form.text
    assert f'name="next" value="{path.replace("&", "&amp;")}"' in form.text


def test_signing_in_opens_the_pages_and_api_reads_but_not_writes(
    private: TestClient, database: Database
) -> None:
    answer = private.post("/login", data={"token": make_token(database, "read"), "next": "/alerts"})
    assert answer.status_code == 303
    assert answer.headers["location"] == "/alerts"
    cookie = answer.headers["set-cookie"]
    assert cookie.startswith(f"{SIGN_IN_COOKIE}=")
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie
    assert private.get("/alerts").status_code == 200
    assert "Sign out" in private.get("/").text
    assert private.get("/api/v1/runs").status_code == 200  # reads take the cookie
    # ... writes need the page's CSRF value too: a cookie is what another site could send
    assert private.post("/api/v1/runs", json=run_payload("cookie-write", [])).status_code == 403


def test_a_wrong_token_is_refused_on_the_form(private: TestClient) -> None:
    answer = private.post("/login", data={"token": "bw_not-a-token", "next": "/compare"})
    assert answer.status_code == 200  # the form again, saying why
    assert "unknown or revoked" in answer.text
    assert 'name="next" value="/compare"' in answer.text
    assert "set-cookie" not in answer.headers
    assert private.get("/").status_code == 303


@pytest.mark.parametrize("wanted", ["https://evil.example/", "//evil.example/", "/\\evil", ""])
def test_sign_in_never_sends_the_browser_to_another_site(
    private: TestClient, database: Database, wanted: str
) -> None:
    answer = private.post("/login", data={"token": make_token(database, "read"), "next": wanted})
    assert answer.headers["location"] == "/"


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "https://evil.example"},
        {"Origin": "null"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site", "Origin": "http://testserver"},
    ],
)
def test_another_site_cannot_sign_a_browser_in(
    private: TestClient, database: Database, headers: dict[str, str]
) -> None:
    token = make_token(database, "triage")
    answer = private.post("/login", data={"token": token, "next": "/"}, headers=headers)
    assert answer.status_code == 403
    assert "own form" in answer.text
    assert "set-cookie" not in answer.headers
    same = {"Origin": "http://testserver", "Sec-Fetch-Site": "same-origin"}
    assert private.post("/login", data={"token": token}, headers=same).status_code == 303


def test_a_revoked_token_and_signing_out_close_the_pages_again(
    private: TestClient, database: Database
) -> None:
    sign_in(private, make_token(database, "read", name="alice"))
    assert private.get("/").status_code == 200
    with database.session_scope() as session:
        revoke_token(session, "alice")
    assert private.get("/").status_code == 303
    sign_in(private, make_token(database, "triage", name="bob"))  # any live token reads
    assert private.get("/").status_code == 200
    assert private.post("/logout").status_code == 403  # without the page's CSRF value
    assert private.get("/").status_code == 200
    out = private.post("/logout", data={"csrf": csrf_of(private)})
    assert out.status_code == 303
    assert private.get("/").status_code == 303


def test_public_pages_need_no_sign_in(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200
    assert "Sign out" not in page.text


def test_signing_in_in_a_browser(page: Page, database: Database) -> None:
    page.goto("/compare?kind=runs")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    page.get_by_label("API token").fill("bw_wrong")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("unknown or revoked")
    page.get_by_label("API token").fill(make_token(database, "read"))
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(re.compile(r"/compare\?kind=runs$"))
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    page.goto("/")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
