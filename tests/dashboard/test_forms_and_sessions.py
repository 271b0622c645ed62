"""Dashboard forms are refused before their body is read and are bounded; the sign-in cookie
is ``__Host-`` prefixed over https; a new sign-in ends the token's previous session (issue 26,
point 10)."""

import re
from collections.abc import Iterator

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from app.core.config import Settings
from app.core.db import Database
from app.dashboard.shell import FORM_MAX_BYTES
from app.main import create_app
from app.tokens.auth import SECURE_SIGN_IN_COOKIE, SIGN_IN_COOKIE
from app.tokens.models import WebSession
from tests.conftest import make_token, serving
from tests.test_security import BodyMeter

FORMS = [
    "/subscriptions",
    "/subscriptions/1",
    "/subscriptions/1/pause",
    "/subscriptions/1/delete",
    "/subscriptions/1/test",
    "/subscriptions/1/deliveries/1/redeliver",
    "/silences",
    "/silences/1/expire",
    "/annotations",
    "/annotations/1/delete",
    "/runs/1/invalidate",
    "/runs/1/delete",
]
URLENCODED = {"Content-Type": "application/x-www-form-urlencoded"}
MIB = 1024 * 1024


def streamed(size: int) -> Iterator[bytes]:
    """A form body of ``size`` bytes, sent chunked (no Content-Length to refuse it by)."""
    yield b"csrf=x&name="
    for _ in range(size // (64 * 1024)):
        yield b"a" * (64 * 1024)


@pytest.fixture
def served(settings: Settings) -> Iterator[tuple[str, BodyMeter]]:
    """The app under uvicorn, with a meter of the body bytes it asked for."""
    application = create_app(settings)
    meter = BodyMeter(application)
    try:
        with serving(meter) as url:
            yield url, meter
    finally:
        application.state.database.dispose()


def test_an_anonymous_form_is_refused_before_its_body_is_read(
    served: tuple[str, BodyMeter],
) -> None:
    url, meter = served
    with httpx.Client(base_url=url, timeout=60) as web:
        for path in FORMS:
            meter.read = 0
            answer = web.post(path, content=streamed(8 * MIB), headers=URLENCODED)
            assert answer.status_code == 403, (path, answer.text[:200])
            assert "Sign in with a token first" in answer.text
            assert meter.read == 0, f"{path} read {meter.read:,} bytes before refusing"


@pytest.mark.both_dialects
def test_a_signed_in_form_is_bounded(served: tuple[str, BodyMeter], database: Database) -> None:
    url, meter = served
    with httpx.Client(base_url=url, timeout=60) as web:
        token = make_token(database, "admin")
        assert web.post("/login", data={"token": token}).status_code == 303
        declared = web.post("/silences", content=b"x" * (FORM_MAX_BYTES + 1), headers=URLENCODED)
        assert declared.status_code == 413
        assert f"at most {FORM_MAX_BYTES} bytes" in declared.text
        meter.read = 0
        chunked = web.post("/silences", content=streamed(8 * MIB), headers=URLENCODED)
        assert chunked.status_code == 413
        # Reading stops a message or two past the cap (uvicorn's messages are up to 64 KiB).
        assert meter.read < 1 * MIB, f"read {meter.read:,} of 8 MiB"
        # Anyone may post the sign-in form, but a sign-in form is small too.
        out = web.post("/login", content=b"token=" + b"x" * FORM_MAX_BYTES, headers=URLENCODED)
        assert out.status_code == 413
        # A form of ordinary size still works.
        page = web.get("/silences").text
        found = re.search(r'<meta name="csrf-token" content="([^"]+)">', page)
        assert found
        fine = web.post("/silences/1/expire", data={"csrf": found.group(1)})
        assert fine.status_code in (303, 404), fine.text[:200]


def test_over_https_the_session_cookie_is_host_prefixed(
    settings: Settings, database: Database
) -> None:
    application = create_app(settings.model_copy(update={"PUBLIC_READ": False}))
    try:
        with TestClient(
            application, base_url="https://testserver", follow_redirects=False
        ) as browser:
            answer = browser.post("/login", data={"token": make_token(database, "read")})
            assert answer.status_code == 303
            cookie = answer.headers["set-cookie"]
            assert cookie.startswith(f"{SECURE_SIGN_IN_COOKIE}=")
            attributes = [part.strip().lower() for part in cookie.split(";")]
            assert "secure" in attributes
            assert "path=/" in attributes
            assert not any(part.startswith("domain=") for part in attributes)
            assert browser.get("/").status_code == 200
            # The same session id under the plain name (planted by a sibling host) is no
            # session over https.
            secret = browser.cookies[SECURE_SIGN_IN_COOKIE]
            browser.cookies.clear()
            browser.cookies.set(SIGN_IN_COOKIE, secret, domain="testserver")
            assert browser.get("/").status_code == 303
    finally:
        application.state.database.dispose()


def test_over_plain_http_the_cookie_keeps_its_plain_name(
    client: TestClient, database: Database
) -> None:
    client.follow_redirects = False
    answer = client.post("/login", data={"token": make_token(database, "read")})
    cookie = answer.headers["set-cookie"]
    assert cookie.startswith(f"{SIGN_IN_COOKIE}=")  # a browser refuses __Host- without Secure
    assert "secure" not in cookie.lower()


def test_a_new_sign_in_ends_the_previous_session_of_the_token(
    settings: Settings, database: Database
) -> None:
    application = create_app(settings.model_copy(update={"PUBLIC_READ": False}))
    token = make_token(database, "read", name="alice")
    other = make_token(database, "read", name="bob")
    try:
        with (
            TestClient(application, follow_redirects=False) as first,
            TestClient(application, follow_redirects=False) as second,
            TestClient(application, follow_redirects=False) as third,
        ):
            assert first.post("/login", data={"token": token}).status_code == 303
            assert third.post("/login", data={"token": other}).status_code == 303
            assert first.get("/").status_code == 200
            assert second.post("/login", data={"token": token}).status_code == 303
            assert second.get("/").status_code == 200
            assert first.get("/").status_code == 303  # signed out by the new sign-in
            assert third.get("/").status_code == 200  # another token's session stays
    finally:
        application.state.database.dispose()
    with database.session_scope() as session:
        assert len(session.scalars(select(WebSession)).all()) == 2
