"""Two sign-ins with one token at once: a new sign-in ends the earlier, so one session stays."""

import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from sqlalchemy import event, func, select

from app.core.config import Settings
from app.core.db import Database
from app.main import create_app
from app.tokens.models import WebSession
from tests.conftest import make_token, serving

pytestmark = pytest.mark.both_dialects

WAIT = 3.0  # how long a sign-in that has ended the others waits for the second to get as far


def test_two_sign_ins_at_once_keep_one_session(settings: Settings, database: Database) -> None:
    """Each sign-in holds, between ending the others and adding its own, until the other one
    has ended the others too (or ``WAIT`` passes): unlocked, both get there and both keep a
    session; with the token's row locked the second waits for the first's commit instead."""
    token = make_token(database, "read")
    application = create_app(settings)
    engine = application.state.database.engine
    both_ended_others = threading.Barrier(2, timeout=WAIT)

    def hold(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if statement.lstrip().upper().startswith("DELETE FROM WEB_SESSION"):
            # Broken (timed out): the other is held back before its delete, as it should be.
            with contextlib.suppress(threading.BrokenBarrierError):
                both_ended_others.wait()

    event.listen(engine, "after_cursor_execute", hold)
    try:
        with serving(application) as base_url:

            def sign_in(_: int) -> int:
                with httpx.Client(base_url=base_url, timeout=30) as browser:
                    return browser.post("/login", data={"token": token}).status_code

            # A first sign-in stamps the token's last use: the two after it write nothing to
            # the token's row (that write would lock it for them), as with any token in use.
            both_ended_others.abort()
            assert sign_in(0) == 303
            both_ended_others.reset()
            with ThreadPoolExecutor(2) as pool:
                answers = list(pool.map(sign_in, range(2)))
    finally:
        event.remove(engine, "after_cursor_execute", hold)
        application.state.database.dispose()
    assert answers == [303, 303]
    with database.session_scope() as session:
        assert session.scalar(select(func.count()).select_from(WebSession)) == 1
