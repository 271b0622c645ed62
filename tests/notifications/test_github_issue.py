"""GitHub issue receivers against a local server that checks requests as GitHub's REST API
would (method, path, headers, JSON fields) and keeps the issues it is sent."""

import json
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest
from markdown_it import MarkdownIt

from app.core.escape import markdown as escape_markdown
from app.notifications import message as notices
from app.notifications import outbound
from app.notifications.message import Message
from app.notifications.receivers import SendContext, github_issue
from app.notifications.receivers.github_issue import NO_TOKEN, send

TOKEN = "ghp_test_token"
RECEIVER = {
    "kind": "github_issue",
    "repository": "perf/bench",
    "labels": ["performance", "regression"],
    "disabled": False,
    "disabled_reason": "",
}
SUBSCRIPTION = {"id": 1, "name": "perf team", "owner": "perf@example.com", "revision": 3}
GROUP = {
    "id": 7,
    "url": "https://bw.example/alerts/7",
    "machine": "h100-a",
    "channel": "nightly",
    "status": "new",
    "created_at": "2026-12-01T13:50:00Z",
    "findings": 1,
    "last_good_run": {"id": 11, "url": "https://bw.example/runs/11", "commit": "abc123"},
    "first_bad_run": {"id": 12, "url": "https://bw.example/runs/12", "commit": "def456"},
    "environment_diff": {"torch": ["2.13.0", "2.14.0.dev20261130"]},
}
ISSUE_FIELDS = {"title", "body", "labels", "assignees", "milestone", "type"}
STATE_REASONS = {"completed", "not_planned", "reopened", None}


def notice(event: str = "opened", **changes: Any) -> Message:
    message = notices.test_message(
        "notice-42", SUBSCRIPTION, "https://bw.example", "2026-12-01T14:00:00Z"
    )
    headline = {"resolved": "Resolved: 1 regression on h100-a (nightly)"}.get(
        event, "1 regression on h100-a (nightly): worst +34.5% latency_ms test-notice"
    )
    payload = {**message.payload, "event": event, "headline": headline, "group": GROUP}
    return Message(message.id, {**payload, **changes})


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    fields: dict[str, Any]


@dataclass
class FakeGitHub:
    """The state of the fake API: issues, what it was sent, and answers to force."""

    base: str = ""
    issues: dict[int, dict[str, Any]] = field(default_factory=dict)
    seen: list[Seen] = field(default_factory=list)
    forced: list[tuple[int, dict[str, str], dict[str, Any]]] = field(default_factory=list)
    next_number: int = 5


class Handler(BaseHTTPRequestHandler):
    github: ClassVar[FakeGitHub]

    def answer(
        self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def refuse(self, status: int, message: str) -> None:
        self.answer(status, {"message": message, "documentation_url": "https://docs.github.com"})

    def header_problem(self) -> tuple[int, str] | None:
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            return 401, "Bad credentials"
        if self.headers.get("Accept") != "application/vnd.github+json":
            return 415, "Unsupported Accept"
        if self.headers.get("X-GitHub-Api-Version") != "2022-11-28":
            return 400, "Unsupported API version"
        if not self.headers.get("User-Agent"):
            return 403, "Request forbidden by administrative rules (no User-Agent)"
        has_body = self.command != "GET"
        if has_body and not self.headers.get("Content-Type", "").startswith("application/json"):
            return 415, "Unsupported Content-Type"
        return None

    def handle_api(self) -> None:
        github = type(self).github
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            fields = json.loads(raw) if raw else {}
        except ValueError:
            return self.refuse(400, "Problems parsing JSON")
        headers = {name.lower(): value for name, value in self.headers.items()}
        github.seen.append(Seen(self.command, self.path, headers, fields))
        if github.forced:
            status, headers, body = github.forced.pop(0)
            return self.answer(status, body, headers)
        if (problem := self.header_problem()) is not None:
            return self.refuse(*problem)
        parts = self.path.split("/")
        if parts[:4] != ["", "repos", "perf", "bench"] or parts[4:5] != ["issues"]:
            return self.refuse(404, "Not Found")
        route = (self.command, len(parts))
        if route == ("POST", 5):
            return self.open_issue(fields)
        number = int(parts[5]) if len(parts) > 5 and parts[5].isdigit() else 0
        if number not in github.issues:
            return self.refuse(404, "Not Found")
        if route == ("PATCH", 6):
            return self.edit_issue(number, fields)
        if route == ("GET", 6):
            issue = github.issues[number]
            shown = {k: issue.get(k) for k in ("state", "state_reason", "html_url", "title")}
            return self.answer(200, {"number": number, **shown})
        if route == ("POST", 7) and parts[6] == "comments":
            return self.comment(number, fields)
        return self.refuse(404, "Not Found")

    def open_issue(self, fields: dict[str, Any]) -> None:
        github = type(self).github
        title, body, labels = fields.get("title"), fields.get("body"), fields.get("labels", [])
        if set(fields) - ISSUE_FIELDS or not isinstance(title, str) or not 0 < len(title) <= 256:
            return self.refuse(422, "Validation Failed: title")
        if not isinstance(body, str) or not isinstance(labels, list):
            return self.refuse(422, "Validation Failed: body, labels")
        number = github.next_number
        github.next_number += 1
        url = f"{github.base}/perf/bench/issues/{number}"
        github.issues[number] = {**fields, "state": "open", "comments": [], "html_url": url}
        self.answer(201, {"number": number, "html_url": url, "state": "open", "title": title})

    def edit_issue(self, number: int, fields: dict[str, Any]) -> None:
        if set(fields) - {"state", "state_reason", *ISSUE_FIELDS}:
            return self.refuse(422, "Validation Failed")
        if fields.get("state") not in ("open", "closed", None):
            return self.refuse(422, "Validation Failed: state")
        if fields.get("state_reason") not in STATE_REASONS:
            return self.refuse(422, "Validation Failed: state_reason")
        issue = type(self).github.issues[number]
        issue.update(fields)
        self.answer(200, {"number": number, "state": issue["state"]})

    def comment(self, number: int, fields: dict[str, Any]) -> None:
        if set(fields) != {"body"} or not isinstance(fields["body"], str) or not fields["body"]:
            return self.refuse(422, "Validation Failed: body")
        issue = type(self).github.issues[number]
        issue["comments"].append(fields["body"])
        url = f"{issue['html_url']}#issuecomment-{len(issue['comments'])}"
        self.answer(201, {"id": len(issue["comments"]), "html_url": url})

    do_POST = do_PATCH = do_GET = handle_api

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    state = FakeGitHub()
    handler = type("GitHubHandler", (Handler,), {"github": state})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    state.base = f"http://127.0.0.1:{server.server_address[1]}"
    yield state
    server.shutdown()
    server.server_close()
    thread.join()


def context(github: FakeGitHub, **changes: Any) -> SendContext:
    fields: dict[str, Any] = {
        "public_url": "https://bw.example",
        "receiver_allow": "127.0.0.1",
        "github_api_url": github.base,
        "github_token": TOKEN,
        "timeout_s": 5.0,
        **changes,
    }
    return SendContext(**fields)


def test_the_first_notice_opens_an_issue(github: FakeGitHub) -> None:
    outcome = send(RECEIVER, notice(), context(github))

    assert outcome.ok, outcome.error
    assert outcome.status == 201
    url = f"{github.base}/perf/bench/issues/5"
    assert outcome.receipt == {"issue_number": 5, "issue_url": url}
    (request,) = github.seen
    assert (request.method, request.path) == ("POST", "/repos/perf/bench/issues")
    assert request.headers["user-agent"] == "benchwatch"
    assert request.fields["title"] == notice().headline
    assert request.fields["labels"] == ["performance", "regression"]
    body = request.fields["body"]
    assert "[Open in benchwatch](https://bw.example/alerts)" in body
    assert "**Machine:** h100\\-a" in body
    assert "[run 12 \\(def456\\)](https://bw.example/runs/12)" in body
    assert "| torch | 2\\.13\\.0 | 2\\.14\\.0\\.dev20261130 |" in body
    assert "test/test\\-notice/inductor/amp/inference" in body
    assert "<!-- benchwatch notice-42 -->" in body


def test_later_notices_comment_and_resolved_closes(github: FakeGitHub) -> None:
    first = send(RECEIVER, notice(), context(github))
    grew = send(RECEIVER, notice("grew"), context(github, previous_receipt=first.receipt))

    assert grew.ok, grew.error
    assert grew.receipt == first.receipt
    assert [(s.method, s.path) for s in github.seen[1:]] == [
        ("POST", "/repos/perf/bench/issues/5/comments")
    ]
    assert list(github.issues) == [5]
    assert github.issues[5]["state"] == "open"
    (comment,) = github.issues[5]["comments"]
    assert comment.startswith("**1 regression on h100\\-a \\(nightly\\)")

    resolved = send(RECEIVER, notice("resolved"), context(github, previous_receipt=grew.receipt))

    assert resolved.ok, resolved.error
    assert [(s.method, s.path) for s in github.seen[2:]] == [
        ("PATCH", "/repos/perf/bench/issues/5"),
        ("POST", "/repos/perf/bench/issues/5/comments"),
    ]
    assert github.seen[2].fields == {"state": "closed", "state_reason": "completed"}
    assert github.issues[5]["state"] == "closed"
    assert github.issues[5]["comments"][1].startswith("**Resolved\\: 1 regression")


def test_a_comment_on_an_issue_that_is_gone_opens_another(github: FakeGitHub) -> None:
    receipt = {"issue_number": 99, "issue_url": "https://github.example/perf/bench/issues/99"}
    outcome = send(RECEIVER, notice("grew"), context(github, previous_receipt=receipt))
    assert outcome.ok, outcome.error
    assert outcome.receipt["issue_number"] == 5
    assert [s.path for s in github.seen] == [
        "/repos/perf/bench/issues/99/comments",
        "/repos/perf/bench/issues",
    ]


def test_a_resolved_group_without_an_issue_opens_none(github: FakeGitHub) -> None:
    outcome = send(RECEIVER, notice("resolved"), context(github))
    assert outcome.ok
    assert not github.seen


def test_crafted_names_cannot_inject_markdown_html_or_mentions(github: FakeGitHub) -> None:
    """Rendered by a CommonMark parser (raw HTML on, as on GitHub): every name shows as text."""
    finding = dict(notice().findings[0])
    finding["model"] = "<img src=x onerror=alert(1)> @perf/admins [x](javascript:alert(1))"
    finding["hints"] = ["**bold** <script>alert(2)</script>\n# heading", "| a | b |"]
    finding["url"] = "javascript:alert(3)"
    assert send(RECEIVER, notice(findings=[finding]), context(github)).ok
    body = github.seen[0].fields["body"]
    page = MarkdownIt("commonmark").enable("table").render(body)

    assert "<img" not in page
    assert "<script" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in page
    assert not [href for href in re.findall(r'href="([^"]*)"', page) if "javascript" in href]
    assert "<strong>bold</strong>" not in page
    assert "<h1>" not in page
    assert "<table>" in page  # the environment's, and only that one
    assert page.count("<table>") == 1
    assert "@perf/admins" not in page
    assert "@\u200bperf/admins" in page
    assert "<!-- benchwatch notice-42 -->" in page


def test_escape_markdown_leaves_words_and_escapes_punctuation() -> None:
    assert escape_markdown("resnet50 v2") == "resnet50 v2"
    assert escape_markdown("a_b*c`d|e") == "a\\_b\\*c\\`d\\|e"
    assert escape_markdown("line\nbreak") == "line break"


def test_no_token(github: FakeGitHub) -> None:
    outcome = send(RECEIVER, notice(), context(github, github_token=""))
    assert not outcome.ok
    assert not outcome.retry
    assert outcome.error == NO_TOKEN == "no GitHub token configured (BENCHWATCH_GITHUB_TOKEN)"
    assert not github.seen


def test_a_wrong_token_is_not_retried(github: FakeGitHub) -> None:
    outcome = send(RECEIVER, notice(), context(github, github_token="ghp_wrong"))
    assert not outcome.ok
    assert not outcome.retry
    assert outcome.status == 401
    assert "Bad credentials" in outcome.error


@pytest.mark.parametrize(
    ("status", "headers"),
    [
        (403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1767225600"}),
        (403, {"retry-after": "60"}),
        (429, {"retry-after": "60"}),
    ],
)
def test_rate_limits_are_retried(github: FakeGitHub, status: int, headers: dict[str, str]) -> None:
    github.forced.append((status, headers, {"message": "API rate limit exceeded"}))
    outcome = send(RECEIVER, notice(), context(github))
    assert not outcome.ok
    assert outcome.retry
    assert outcome.status == status
    assert "rate limit" in outcome.error


def test_a_plain_403_is_not_retried(github: FakeGitHub) -> None:
    github.forced.append((403, {}, {"message": "Resource not accessible by integration"}))
    outcome = send(RECEIVER, notice(), context(github))
    assert not outcome.ok
    assert not outcome.retry


def test_the_ssrf_guard_applies(github: FakeGitHub) -> None:
    outcome = send(RECEIVER, notice(), context(github, receiver_allow=""))
    assert not outcome.ok
    assert not outcome.retry
    assert "loopback" in outcome.error
    assert not github.seen


def test_a_dot_segment_repository_is_refused(github: FakeGitHub) -> None:
    outcome = send({**RECEIVER, "repository": "../bench"}, notice(), context(github))
    assert not outcome.ok
    assert "not a GitHub repository" in outcome.error
    assert not github.seen


def test_a_rate_limit_says_how_long_to_wait() -> None:
    reset = str(int(time.time()) + 300)
    limited = outbound.Response(
        403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": reset}, b"{}", 5.0
    )
    judged = github_issue._judge(limited)
    assert judged.retry
    assert judged.retry_after_s is not None
    assert 290 < judged.retry_after_s <= 300
    told = outbound.Response(429, {"retry-after": "42"}, b"{}", 5.0)
    assert github_issue._judge(told).retry_after_s == 42.0
