"""Two-way bug status (issue 31, point 4): a group's GitHub issue, closed or reopened, triages
the group: through GitHub's signed webhook, or the poll against a local server that answers as
GitHub's REST API does; the bug link shows the issue's state."""

import hashlib
import hmac
import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy import select

from app.anomalies.models import AlertGroup
from app.audit.models import AuditEntry
from app.core.config import Settings
from app.core.db import Database
from app.main import create_app
from app.notifications import issue_sync
from app.notifications.models import IssueState
from tests.anomalies.test_bulk_triage import findings
from tests.conftest import make_token
from tests.notifications.test_github_issue import TOKEN, FakeGitHub, github

__all__ = ["github"]  # the fixture, used by name
SECRET = "webhook-s3cret"
ISSUE = "https://github.com/perf/bench/issues/42"


@pytest.fixture
def hooked(settings: Settings) -> Iterator[TestClient]:
    application = create_app(
        settings.model_copy(update={"GITHUB_WEBHOOK_SECRET": SecretStr(SECRET)})
    )
    with TestClient(application) as client:
        yield client
    application.state.database.dispose()


def linked(client: TestClient, database: Database, url: str = ISSUE) -> int:
    """A group with two new steps whose bug link is ``url``."""
    findings(database, 2)
    headers = {"Authorization": f"Bearer {make_token(database, 'triage')}"}
    answer = client.patch("/api/v1/alert-groups/1", json={"bug_url": url}, headers=headers)
    assert answer.status_code == 200, answer.text
    return 1


def hook(
    client: TestClient, event: dict[str, Any], kind: str = "issues", secret: str = SECRET
) -> Any:
    body = json.dumps(event).encode()
    signature = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    headers = {"X-GitHub-Event": kind, "X-Hub-Signature-256": signature}
    return client.post("/api/v1/github/webhook", content=body, headers=headers)


def issue_event(action: str, url: str = ISSUE, reason: str | None = "completed") -> dict[str, Any]:
    state = "closed" if action == "closed" else "open"
    issue = {"number": 42, "html_url": url, "state": state, "state_reason": reason}
    return {"action": action, "issue": issue, "sender": {"login": "octocat"}}


def test_closing_the_issue_fixes_the_group_and_reopening_reopens_it(
    hooked: TestClient, database: Database
) -> None:
    group = linked(hooked, database)
    answer = hook(hooked, issue_event("closed"))
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"event": "issues", "groups": [group]}
    stored = hooked.get(f"/api/v1/alert-groups/{group}").json()
    assert stored["status"] == "fixed"
    assert stored["triaged_by"] == "github: octocat"
    assert {r["status"] for r in stored["regressions"]} == {"fixed"}
    assert hook(hooked, issue_event("closed")).json()["groups"] == []  # told twice: acts once
    reopened = hook(hooked, issue_event("reopened", reason="reopened"))
    assert reopened.json()["groups"] == [group]
    assert hooked.get(f"/api/v1/alert-groups/{group}").json()["status"] == "acknowledged"
    with database.session_scope() as session:
        actions = session.scalars(
            select(AuditEntry.actor).where(AuditEntry.action == "group.triage")
        ).all()
    assert actions.count("github: octocat") == 2
    page = hooked.get("/alerts", params={"status": "acknowledged"}).text
    assert '<span class="tag issue-open"' in page


@pytest.mark.both_dialects  # bad input: what Postgres refuses, SQLite takes
def test_a_webhook_must_be_signed_and_configured(
    hooked: TestClient, client: TestClient, database: Database
) -> None:
    linked(hooked, database)
    assert hook(hooked, issue_event("closed"), secret="wrong").status_code == 401
    unsigned = hooked.post(
        "/api/v1/github/webhook", content=b"{}", headers={"X-GitHub-Event": "issues"}
    )
    assert unsigned.status_code == 401
    assert hook(client, issue_event("closed")).status_code == 404  # no secret configured here
    assert hooked.get("/api/v1/alert-groups/1").json()["status"] == "new"
    assert hook(hooked, {"zen": "Design for failure."}, kind="ping").json() == {
        "event": "ping",
        "groups": [],
    }
    assert hook(hooked, issue_event("edited")).json()["groups"] == []
    crafted = {"action": "closed", "issue": {"html_url": ["x"]}, "sender": "octocat"}
    assert hook(hooked, crafted).json()["groups"] == []  # odd shapes: ignored, no 500
    assert hook(hooked, [1, 2]).status_code == 422
    past = issue_event("closed", url="https://github.com/perf/bench/issues/9999999999")
    assert hook(hooked, past).json()["groups"] == []  # no 500 on Postgres
    assert hook(hooked, issue_event("closed", url="https://example.com/x")).json()["groups"] == []
    assert hooked.get("/api/v1/alert-groups/1").json()["status"] == "new"


def test_the_poll_reads_linked_issues_when_no_webhook_comes(
    client: TestClient, database: Database, settings: Settings, github: FakeGitHub
) -> None:
    github.issues[7] = {
        "state": "open",
        "state_reason": None,
        "html_url": f"{github.base}/perf/bench/issues/7",
        "comments": [],
    }
    url = github.issues[7]["html_url"]
    group = linked(client, database, url)
    findings(database, 1, project="elsewhere")  # a link to another GitHub: never read here
    headers = {"Authorization": f"Bearer {make_token(database, 'triage')}"}
    client.patch("/api/v1/alert-groups/2", json={"bug_url": ISSUE}, headers=headers)
    polling = settings.model_copy(
        update={
            "GITHUB_API_URL": github.base,
            "GITHUB_TOKEN": SecretStr(TOKEN),
            "RECEIVER_ALLOW": "127.0.0.1",
            "GITHUB_POLL_S": 0.0,
        }
    )
    assert issue_sync.poll(database, polling) == []  # open, first seen: nothing to do
    github.issues[7].update(state="closed", state_reason="not_planned")
    assert issue_sync.poll(database, polling) == [group]
    stored = client.get(f"/api/v1/alert-groups/{group}").json()
    assert (stored["status"], stored["triaged_by"]) == ("fixed", "github (polled)")
    assert issue_sync.poll(database, polling) == []  # closed: not read again
    with database.session_scope() as session:
        state = session.scalars(select(IssueState)).one()
        assert (state.state, state.state_reason, state.number) == ("closed", "not_planned", 7)
    page = client.get("/alerts", params={"status": "fixed"}).text
    assert "closed (not planned)" in page
    gets = [s for s in github.seen if s.method == "GET"]
    assert [g.path for g in gets] == ["/repos/perf/bench/issues/7"] * 2
    assert gets[0].headers["authorization"] == f"Bearer {TOKEN}"


def test_an_issue_the_receiver_opened_becomes_the_groups_bug_link(database: Database) -> None:
    findings(database, 1)
    with database.session_scope() as session:
        issue_sync.link_opened_issue(session, 1, ISSUE)
        issue_sync.link_opened_issue(session, 1, "https://github.com/perf/bench/issues/43")
    with database.session_scope() as session:
        assert session.get_one(AlertGroup, 1).bug_url == ISSUE  # a link is kept, not replaced
        assert [s.url for s in session.scalars(select(IssueState).order_by(IssueState.id))] == [
            ISSUE,
            "https://github.com/perf/bench/issues/43",
        ]


@pytest.mark.parametrize(
    ("url", "parsed"),
    [
        (ISSUE, ("perf/bench", 42)),
        ("https://ghe.example:8443/org/repo.x/issues/1", ("org/repo.x", 1)),
        ("https://github.com/perf/bench/pull/42", None),
        ("javascript:alert(1)//github.com/a/b/issues/1", None),
        ("https://github.com/perf/bench/issues/0", None),
        ("https://github.com/perf/bench/issues/42#top", None),
        ("https://github.com/perf/bench/issues/2147483647", ("perf/bench", 2147483647)),
        ("https://github.com/perf/bench/issues/9999999999", None),  # past an integer column
    ],
)
def test_only_an_issues_web_address_is_followed(url: str, parsed: tuple[str, int] | None) -> None:
    assert issue_sync.parse(url) == parsed


def test_the_poll_reads_the_configured_githubs_issues_only() -> None:
    assert issue_sync.web_host("https://api.github.com") == "github.com"
    assert issue_sync.web_host("https://ghe.example/api/v3") == "ghe.example"
