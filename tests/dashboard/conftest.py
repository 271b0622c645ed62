"""Browser fixtures: the real app under uvicorn, driven by headless Chromium (Playwright).

Playwright cannot download its own browsers here, so it drives Debian's chromium
(``apt-get install chromium``; ``.ci/run`` installs it in CI).
"""

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import (
    Browser,
    ConsoleMessage,
    Page,
    ViewportSize,
    expect,
    sync_playwright,
)
from playwright.sync_api import Error as PlaywrightError

from tests.conftest import service_missing

CHROMIUM = os.environ.get("BENCHWATCH_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",  # root in CI, no user namespaces
    "--disable-gpu",
    "--disable-background-networking",  # nothing outside localhost is reachable
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",  # containers often give /dev/shm 64 MB; Chromium crashes on it
]
VIEWPORT: ViewportSize = {"width": 1280, "height": 800}
TIMEOUT_MS = 15_000  # Playwright's default of 30 s only makes a broken page slower to report
expect.set_options(timeout=TIMEOUT_MS)  # expect() has its own default (5 s): too short in CI


def assert_no_console_errors(errors: list[str]) -> None:
    """Fail when the page logged console errors or raised uncaught exceptions."""
    assert not errors, "the page logged errors:\n" + "\n".join(errors)


@pytest.fixture(scope="session")
def chromium_path() -> str:
    """Chromium's executable; fails in CI (skips elsewhere) when it is not installed."""
    if not (Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK)):
        hint = f"{CHROMIUM} (apt-get install chromium, or set BENCHWATCH_TEST_CHROMIUM)"
        service_missing("Chromium", FileNotFoundError(hint))
    return CHROMIUM


@pytest.fixture(scope="session")
def browser(chromium_path: str) -> Iterator[Browser]:
    """One headless Chromium for the whole session (each test gets its own context)."""
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=chromium_path, headless=True, args=CHROMIUM_ARGS
        )
        yield chromium
        chromium.close()


@pytest.fixture
def console_errors() -> list[str]:
    """Console errors and uncaught exceptions of the test's page, in order."""
    return []


@pytest.fixture
def page(browser: Browser, live_server: str, console_errors: list[str]) -> Iterator[Page]:
    """A fresh 1280x800 page whose relative URLs resolve against ``live_server``.

    Teardown fails the test when the page logged any console error (a failed resource load
    counts) or raised an uncaught exception.
    """
    context = browser.new_context(viewport=VIEWPORT, base_url=live_server)
    context.set_default_timeout(TIMEOUT_MS)
    new_page = context.new_page()

    def on_console(message: ConsoleMessage) -> None:
        where = message.location
        # Chromium asks for /favicon.ico on its own after a load; the page did not.
        if message.type == "error" and not where["url"].endswith("/favicon.ico"):
            console_errors.append(f"console: {message.text} ({where['url']}:{where['lineNumber']})")

    def on_page_error(error: PlaywrightError) -> None:
        console_errors.append(f"pageerror: {error.stack or f'{error.name}: {error.message}'}")

    new_page.on("console", on_console)
    new_page.on("pageerror", on_page_error)
    yield new_page
    try:
        if not new_page.is_closed():
            new_page.evaluate("0")  # a round trip delivers the events already sent
        assert_no_console_errors(console_errors)
    finally:
        context.close()
