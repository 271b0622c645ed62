"""The browser harness itself: a real page load, and the console-error check."""

import json

import pytest
from playwright.sync_api import Page

from tests.dashboard.conftest import assert_no_console_errors


def test_browser_loads_a_page_from_the_live_server(page: Page, live_server: str) -> None:
    response = page.goto(f"{live_server}/healthz")

    assert response is not None
    assert response.status == 200
    assert json.loads(page.inner_text("body")) == {"status": "ok"}


def test_console_errors_fail_the_check() -> None:
    assert_no_console_errors([])
    with pytest.raises(AssertionError, match="Uncaught TypeError"):
        assert_no_console_errors(["pageerror: Uncaught TypeError: x is undefined"])


def test_page_records_console_errors_and_uncaught_exceptions(
    page: Page, live_server: str, console_errors: list[str]
) -> None:
    page.goto(f"{live_server}/healthz")
    with page.expect_console_message():
        page.evaluate("console.error('logged on purpose')")
    with page.expect_event("pageerror"):
        page.evaluate("setTimeout(() => { throw new Error('thrown on purpose'); })")

    assert console_errors[0].startswith("console: logged on purpose")
    assert console_errors[1].startswith("pageerror: Error: thrown on purpose")
    with pytest.raises(AssertionError, match="thrown on purpose"):
        assert_no_console_errors(console_errors)
    console_errors.clear()  # expected here; the page fixture's own check must pass
