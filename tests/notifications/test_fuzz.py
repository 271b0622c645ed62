"""/api/v1/subscriptions fuzzed with an admin token (the API's fuzz test holds no admin token)."""

from typing import Any

import hypothesis
import pytest
import schemathesis
from fastapi.testclient import TestClient

from app.core.config import Settings
from app.core.db import Database
from app.core.migrate import upgrade_database
from app.main import create_app
from tests.conftest import PEPPER, make_token
from tests.test_api_fuzz import EXAMPLES, hypothesis_settings, schema

subscriptions = schema.include(path_regex="^/api/v1/subscriptions")


@pytest.fixture(scope="module")
def admin_app(tmp_path_factory: pytest.TempPathFactory) -> tuple[Settings, str]:
    url = f"sqlite:///{tmp_path_factory.mktemp('fuzz') / 'subscriptions.db'}"
    upgrade_database(url)
    database = Database(url)
    token = make_token(database, "admin", name="fuzz-admin")
    database.dispose()
    settings = Settings(DATABASE_URL=url, TOKEN_PEPPER=PEPPER, BROKER_URL=None)
    application = create_app(settings)
    with TestClient(application) as client:  # one to read, change and delete
        body = {"name": "seed", "receivers": [{"kind": "email", "to": ["a@b.example"]}]}
        headers = {"Authorization": f"Bearer {token}"}
        assert client.post("/api/v1/subscriptions", json=body, headers=headers).status_code == 201
    application.state.database.dispose()
    return settings, token


@pytest.fixture
def app_and_headers(admin_app: tuple[Settings, str]) -> tuple[Any, dict[str, str]]:
    """A fresh app on the seeded database (one per test, not per example) and the token."""
    settings, token = admin_app
    return create_app(settings), {"Authorization": f"Bearer {token}"}


@subscriptions.parametrize()
@hypothesis.settings(hypothesis_settings(EXAMPLES))
def test_subscription_answers_are_declared_and_no_5xx(
    case: schemathesis.Case, app_and_headers: tuple[Any, dict[str, str]]
) -> None:
    application, headers = app_and_headers
    case.call_and_validate(app=application, headers=headers)
