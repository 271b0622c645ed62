"""A subscription's OpenAPI schema refuses what the API refuses, and takes what it takes.

Issue 26 point 9: the schema called valid NUL characters in rules and names, an Apprise URL
of any form, two feeds and empty exclude rules, which the API refuses; and the API took
what the schema calls invalid ("yes" for a boolean, true for an hour, a signing secret
padded past its length, one value for a rule's list).
"""

from typing import Any

import jsonschema_rs
import pytest
from fastapi.testclient import TestClient

from app.core.config import Settings
from app.core.db import Database
from app.main import create_app
from tests.conftest import PEPPER, make_token
from tests.notifications.test_api import URL, new
from tests.test_api_edges import assert_error

pytestmark = pytest.mark.both_dialects

EMAIL = {"kind": "email", "to": ["oncall@example.com"]}
WEBHOOK = {"kind": "webhook", "url": "https://hooks.example/bw"}


def valid(**fields: Any) -> dict[str, Any]:
    """A body every schema since the issue calls valid, ``fields`` changed (rules as lists)."""
    rules = {"match": {"model": ["Bert*"]}, "exclude": [{"config": ["eager"]}]}
    return new(**(rules | fields))


@pytest.fixture
def admin(database: Database) -> dict[str, str]:
    return {"Authorization": f"Bearer {make_token(database, 'admin', name='admin')}"}


@pytest.fixture(scope="module")
def create_schema() -> Any:
    """A validator of SubscriptionCreate as the served document says it (JSON Schema 2020-12)."""
    settings = Settings(DATABASE_URL="sqlite://", TOKEN_PEPPER=PEPPER, BROKER_URL=None)
    application = create_app(settings)
    document = application.openapi()
    application.state.database.dispose()
    root = {"$ref": "#/components/schemas/SubscriptionCreate", **document}
    return jsonschema_rs.Draft202012Validator(root)


# Each refused, at its location, by the API and by its schema.
REFUSED = [
    (valid(exclude=[{"config": ["eager", "a\x00b"]}]), "exclude[0].config[1]"),
    (valid(match={"machine": "h100\x00"}), "match.machine[0]"),
    (valid(owner="a\x00"), "owner"),
    (valid(receivers=[{**EMAIL, "disabled_reason": "\x00"}]), "receivers[0].email.disabled_reason"),
    (valid(receivers=[{"kind": "apprise", "url": "mmost://h\x00/t"}]), "receivers[0].apprise.url"),
    (valid(exclude=[{"config": None}]), "exclude[0]"),  # all fields null: it would veto all
    (valid(receivers=[{"kind": "feed"}, {"kind": "feed"}]), "receivers"),
    (valid(receivers=[{**EMAIL, "disabled": "yes"}]), "receivers[0].email.disabled"),
    (valid(paused=1), "paused"),
    (valid(when={"digest_hours": ["9.0"]}), "when.digest.digest_hours[0]"),
    (valid(when={"digest_hours": [True]}), "when.digest.digest_hours[0]"),
    (valid(match={"min_rel_change": "0.5"}), "match.min_rel_change"),
    (
        valid(receivers=[{"kind": "email", "to": ["on\x85call@example.com"]}]),
        "receivers[0].email.to[0]",
    ),
    (  # 24 bytes, then padding past them
        valid(receivers=[{**WEBHOOK, "secrets": ["whsec_" + "A" * 32 + "=="]}]),
        "receivers[0].webhook.secrets[0]",
    ),
    (
        valid(receivers=[{**WEBHOOK, "secrets": ["whsec_" + "A" * 84 + "AAA="]}]),  # 65 bytes
        "receivers[0].webhook.secrets[0]",
    ),
]


@pytest.mark.parametrize(("body", "where"), REFUSED)
def test_what_the_api_refuses_its_schema_refuses(
    body: dict[str, Any], where: str, client: TestClient, admin: dict[str, str], create_schema: Any
) -> None:
    assert_error(client.post(URL, json=body, headers=admin), 422, where)
    assert not create_schema.is_valid(body)


TAKEN = [
    valid(),
    new(),  # one value for a rule's list: the schema said a list only
    valid(receivers=[{**WEBHOOK, "secrets": ["whsec_" + "QUJD" * 8, "whsec_" + "A" * 86 + "=="]}]),
    valid(when={"digest_hours": [9.0, 17]}),  # JSON Schema's integers include 9.0
    valid(when={"digest_hours": ["9", "17"]}),  # as the dashboard's form gives them
    valid(match={"min_rel_change": 1, "kind": "failure", "model": ["Bert*", "T5"]}),
    valid(exclude=[{"config": ["eager"], "mode": None}], receivers=[EMAIL, {"kind": "feed"}]),
]


@pytest.mark.parametrize("body", TAKEN)
def test_what_its_schema_takes_the_api_takes(
    body: dict[str, Any], client: TestClient, admin: dict[str, str], create_schema: Any
) -> None:
    assert create_schema.is_valid(body)
    created = client.post(URL, json=body, headers=admin)
    assert created.status_code == 201, created.text
