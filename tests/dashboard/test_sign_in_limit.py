"""Failed sign-ins are limited per client address (issue 26, the login form's limit)."""

import pytest
from fastapi.testclient import TestClient

from app.core.config import Settings
from app.core.db import Database
from app.main import create_app
from tests.conftest import make_token


def test_failed_sign_ins_past_the_limit_get_429_with_retry_after(
    settings: Settings, database: Database
) -> None:
    limited = settings.model_copy(update={"LOGIN_FAIL_LIMIT": 3, "LOGIN_FAIL_WINDOW_S": 600.0})
    token = make_token(database, "read", name="reader")
    with TestClient(create_app(limited), follow_redirects=False) as client:
        for _ in range(3):
            answer = client.post("/login", data={"token": "bw_guessed"})
            assert answer.status_code == 200  # the form again: that token is unknown
            assert "unknown or revoked" in answer.text
        refused = client.post("/login", data={"token": "bw_guessed"})
        assert refused.status_code == 429
        assert 1 <= int(refused.headers["retry-after"]) <= 600
        assert "Too many failed sign-ins" in refused.text
        # A right token is not even checked meanwhile: a guesser learns nothing from it.
        assert client.post("/login", data={"token": token}).status_code == 429
        assert client.get("/").status_code == 200  # reading is not sign-in
    with TestClient(create_app(limited), follow_redirects=False) as client:
        for _ in range(5):  # successes spend nothing
            assert client.post("/login", data={"token": token}).status_code == 303


@pytest.mark.parametrize("limit", [0])
def test_the_limit_is_off_at_zero(settings: Settings, limit: int) -> None:
    off = settings.model_copy(update={"LOGIN_FAIL_LIMIT": limit})
    with TestClient(create_app(off), follow_redirects=False) as client:
        for _ in range(30):
            assert client.post("/login", data={"token": "bw_guessed"}).status_code == 200
