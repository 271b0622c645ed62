"""The pull-request gate's posts to GitHub: the job's environment, and a whole gate posting to
a local server that checks requests as GitHub's REST API documents them (method, path, headers,
JSON fields, limits, pagination)."""

import io
import json
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlsplit

import pytest
from benchwatch_client.gate_github import COMMENT_PAGES, GitHubContext, github_context
from benchwatch_client.gate_judge import GateOptions
from benchwatch_client.gate_report import run_gate

from tests.client.test_gate_report import document, item

TOKEN = "ghs_test_token_0123456789"
HEAD = "a" * 40  # the pull request's head commit
MERGE = "b" * 40  # GITHUB_SHA on a pull_request event: GitHub's merge commit
BOT = {"login": "github-actions[bot]", "type": "Bot"}


# ---- the job's environment


def event_file(tmp_path: Path, event: dict[str, Any]) -> str:
    path = tmp_path / "event.json"
    path.write_text(json.dumps(event))
    return str(path)


def test_the_pull_request_and_its_head_come_from_the_event(tmp_path: Path) -> None:
    event = {"pull_request": {"number": 7, "head": {"sha": HEAD}}}
    env = {
        "GITHUB_TOKEN": TOKEN,
        "GITHUB_REPOSITORY": "perf/bench",
        "GITHUB_EVENT_PATH": event_file(tmp_path, event),
        "GITHUB_SHA": MERGE,
        "GITHUB_REF": "refs/pull/9/merge",
    }
    context = github_context(env)
    assert isinstance(context, GitHubContext)
    assert (context.pull_number, context.head_sha) == (7, HEAD)
    assert context.api_url == "https://api.github.com"
    assert TOKEN not in repr(context)


def test_without_an_event_the_ref_and_sha_serve() -> None:
    env = {
        "GITHUB_TOKEN": TOKEN,
        "GITHUB_REPOSITORY": "perf/bench",
        "GITHUB_REF": "refs/pull/9/merge",
        "GITHUB_SHA": MERGE,
        "GITHUB_API_URL": "https://ghe.example/api/v3/",
    }
    context = github_context(env)
    assert isinstance(context, GitHubContext)
    assert (context.pull_number, context.head_sha) == (9, MERGE)
    assert context.api_url == "https://ghe.example/api/v3"
    push = github_context({**env, "GITHUB_REF": "refs/heads/feature-x"})
    assert isinstance(push, GitHubContext)
    assert push.pull_number is None


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"GITHUB_TOKEN": ""}, "no GITHUB_TOKEN"),
        ({"GITHUB_REPOSITORY": "../bench"}, "not owner/name"),
        ({"GITHUB_REPOSITORY": "perf"}, "not owner/name"),
        ({"GITHUB_API_URL": "file:///etc/passwd"}, "not an http(s) URL"),
    ],
)
def test_an_unusable_environment_is_said(changes: dict[str, str], reason: str) -> None:
    env = {"GITHUB_TOKEN": TOKEN, "GITHUB_REPOSITORY": "perf/bench", **changes}
    context = github_context(env)
    assert isinstance(context, str)
    assert reason in context


# ---- a local GitHub


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    fields: Any


@dataclass
class FakeGitHub:
    """The fake API's state: pull request 7's comments, check runs, and answers to force."""

    base: str = ""
    commits: set[str] = field(default_factory=lambda: {HEAD, MERGE})
    comments: list[dict[str, Any]] = field(default_factory=list)
    check_runs: list[dict[str, Any]] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)
    forced: list[tuple[int, dict[str, str], Any]] = field(default_factory=list)
    page_size: int = 100  # lower than per_page to make pages in a test
    next_link_base: str = ""  # where the Link header points; default: this server
    hold_s: float = 0.0
    next_id: int = 100
    deleted: set[int] = field(default_factory=set)  # listed, then gone before the edit


CHECK_FIELDS = {"name", "head_sha", "details_url", "external_id", "status", "started_at"}
CHECK_FIELDS |= {"conclusion", "completed_at", "output", "actions"}
STATUSES = {"queued", "in_progress", "completed", "waiting", "requested", "pending"}
CONCLUSIONS = {"action_required", "cancelled", "failure", "neutral", "success", "skipped"}
CONCLUSIONS |= {"timed_out"}  # "stale" is GitHub's alone to set
ISO_8601 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
REPO = "/repos/perf/bench"


class Handler(BaseHTTPRequestHandler):
    github: ClassVar[FakeGitHub]

    def answer(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        try:
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up waiting (the slow-GitHub test)

    def refuse(self, status: int, message: str) -> None:
        self.answer(status, {"message": message, "documentation_url": "https://docs.github.com"})

    def header_problem(self, has_body: bool) -> tuple[int, str] | None:
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            return 401, "Bad credentials"
        if self.headers.get("Accept") != "application/vnd.github+json":
            return 415, "Unsupported Accept"
        if self.headers.get("X-GitHub-Api-Version") != "2022-11-28":
            return 400, "Unsupported API version"
        if not self.headers.get("User-Agent"):
            return 403, "Request forbidden by administrative rules (no User-Agent)"
        if has_body and not self.headers.get("Content-Type", "").startswith("application/json"):
            return 415, "Unsupported Content-Type"
        return None

    def handle_api(self) -> None:
        github = type(self).github
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            fields = json.loads(raw) if raw else None
        except ValueError:
            return self.refuse(400, "Problems parsing JSON")
        headers = {name.lower(): value for name, value in self.headers.items()}
        github.seen.append(Seen(self.command, self.path, headers, fields))
        time.sleep(github.hold_s)
        if github.forced:
            status, headers, body = github.forced.pop(0)
            return self.answer(status, body, headers)
        if (problem := self.header_problem(raw != b"")) is not None:
            return self.refuse(*problem)
        url = urlsplit(self.path)
        route = (self.command, url.path)
        if route == ("POST", f"{REPO}/check-runs"):
            return self.create_check_run(fields)
        if route == ("GET", f"{REPO}/issues/7/comments"):
            return self.list_comments(url.path, parse_qs(url.query))
        if route == ("POST", f"{REPO}/issues/7/comments"):
            return self.create_comment(fields)
        if self.command == "PATCH" and url.path.startswith(f"{REPO}/issues/comments/"):
            return self.update_comment(url.path.rsplit("/", 1)[1], fields)
        return self.refuse(404, "Not Found")

    def create_check_run(self, fields: Any) -> None:
        github = type(self).github
        if not isinstance(fields, dict) or set(fields) - CHECK_FIELDS:
            return self.refuse(422, "Invalid request: unknown fields")
        if not isinstance(fields.get("name"), str) or not fields["name"]:
            return self.refuse(422, "Invalid request: name")
        if fields.get("head_sha") not in github.commits:
            return self.refuse(422, "No commit found for SHA")
        if fields.get("status", "queued") not in STATUSES:
            return self.refuse(422, "Invalid request: status")
        completed = fields.get("status") == "completed" or "completed_at" in fields
        if completed and fields.get("conclusion") not in CONCLUSIONS:
            return self.refuse(422, "Invalid request: conclusion is required when completed")
        if "completed_at" in fields and not ISO_8601.fullmatch(str(fields["completed_at"])):
            return self.refuse(422, "Invalid request: completed_at")
        output = fields.get("output", {})
        if not isinstance(output, dict) or not {"title", "summary"} <= set(output):
            return self.refuse(422, "Invalid request: output needs title and summary")
        for name in ("title", "summary", "text"):
            value = output.get(name, "")
            if not isinstance(value, str) or len(value) > 65_535:
                return self.refuse(422, f"Invalid request: output.{name}")
        github.check_runs.append(fields)
        number = len(github.check_runs)
        url = f"https://github.example/perf/bench/runs/{number}"
        self.answer(201, {"id": number, "html_url": url, **fields})

    def list_comments(self, path: str, query: dict[str, list[str]]) -> None:
        github = type(self).github
        per_page = min(int(query.get("per_page", ["30"])[0]), 100, github.page_size)
        page = int(query.get("page", ["1"])[0])
        start = (page - 1) * per_page
        headers = {}
        if start + per_page < len(github.comments):
            base = github.next_link_base or github.base
            nxt = f'<{base}{path}?per_page={per_page}&page={page + 1}>; rel="next"'
            headers["Link"] = nxt
        self.answer(200, github.comments[start : start + per_page], headers)

    def valid_body(self, fields: Any) -> bool:
        if not isinstance(fields, dict) or set(fields) != {"body"}:
            self.refuse(422, "Invalid request: body is the only field")
            return False
        if not isinstance(fields["body"], str) or not 0 < len(fields["body"]) <= 65_536:
            self.refuse(422, "Validation Failed: body is too long (maximum is 65536 characters)")
            return False
        return True

    def create_comment(self, fields: Any) -> None:
        github = type(self).github
        if self.valid_body(fields):
            github.next_id += 1
            comment = {"id": github.next_id, "body": fields["body"], "user": BOT}
            github.comments.append(comment)
            url = f"https://github.example/perf/bench/pull/7#issuecomment-{github.next_id}"
            self.answer(201, {**comment, "html_url": url})

    def update_comment(self, comment_id: str, fields: Any) -> None:
        github = type(self).github
        found = [c for c in github.comments if str(c["id"]) == comment_id]
        if not found or found[0]["id"] in github.deleted:
            return self.refuse(404, "Not Found")
        if self.valid_body(fields):
            found[0]["body"] = fields["body"]
            url = f"https://github.example/perf/bench/pull/7#issuecomment-{comment_id}"
            self.answer(200, {**found[0], "html_url": url})

    do_POST = do_PATCH = do_GET = handle_api

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    state = FakeGitHub()
    handler = type("GitHubHandler", (Handler,), {"github": state})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    state.base = f"http://127.0.0.1:{server.server_address[1]}"
    yield state
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture
def env(github: FakeGitHub, tmp_path: Path) -> dict[str, str]:
    event = {"pull_request": {"number": 7, "head": {"sha": HEAD}}}
    return {
        "GITHUB_ACTIONS": "true",
        "GITHUB_TOKEN": TOKEN,
        "GITHUB_API_URL": github.base,
        "GITHUB_REPOSITORY": "perf/bench",
        "GITHUB_EVENT_PATH": event_file(tmp_path, event),
        "GITHUB_REF": "refs/pull/7/merge",
        "GITHUB_SHA": MERGE,
        "GITHUB_WORKFLOW": "perf",
        "GITHUB_STEP_SUMMARY": str(tmp_path / "step_summary"),
    }


POST_BOTH = GateOptions(post_check=True, post_comment=True, channel="pr", timeout_s=5.0)


def run(
    env: dict[str, str], options: GateOptions = POST_BOTH, doc: Any = None
) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = run_gate(doc or document(), options, env, out, err)
    return status, out.getvalue(), err.getvalue()


def test_a_failing_gate_posts_a_check_run_and_a_comment(
    github: FakeGitHub, env: dict[str, str]
) -> None:
    status, out, err = run(env)

    assert status == 3
    assert out.startswith("benchwatch gate, run 42")
    assert [(s.method, urlsplit(s.path).path) for s in github.seen] == [
        ("POST", "/repos/perf/bench/check-runs"),
        ("GET", "/repos/perf/bench/issues/7/comments"),
        ("POST", "/repos/perf/bench/issues/7/comments"),
    ]
    assert urlsplit(github.seen[1].path).query == "per_page=100"
    check = github.seen[0].fields
    assert check["head_sha"] == HEAD  # the pull request's head, not the merge commit
    assert (check["name"], check["status"], check["conclusion"]) == (
        "benchwatch (perf/pr)",
        "completed",
        "failure",
    )
    assert check["details_url"] == "https://bw.example/runs/42/verdicts"
    assert check["output"]["title"] == "failed: 1 regression"
    assert "dddddddddddd" in check["output"]["summary"]
    assert "🔴 regression" in check["output"]["text"]
    (comment,) = github.comments
    assert comment["body"].startswith("<!-- benchwatch-gate perf/pr -->\n### ❌ benchwatch")
    assert "check run posted: failure: https://github.example/perf/bench/runs/1" in err
    assert "comment posted: added: https://github.example/perf/bench/pull/7#issuecomment" in err
    assert "summary appended to" in err
    assert Path(env["GITHUB_STEP_SUMMARY"]).read_text().startswith("### ❌ benchwatch")
    assert TOKEN not in out + err


def test_report_only_posts_a_neutral_check(github: FakeGitHub, env: dict[str, str]) -> None:
    status, _, _ = run(env, replace(POST_BOTH, report_only=True, post_comment=False))
    assert status == 0
    assert github.check_runs[0]["conclusion"] == "neutral"
    assert github.check_runs[0]["output"]["title"].startswith("report only: would have failed")


def test_the_comment_is_updated_in_place_found_on_a_later_page(
    github: FakeGitHub, env: dict[str, str]
) -> None:
    marker = "<!-- benchwatch-gate perf/pr -->"
    ann = {"login": "ann", "type": "User"}
    github.comments = [
        *[{"id": i, "body": f"comment {i}", "user": ann} for i in range(1, 6)],
        {
            "id": 6,
            "body": f"{marker}\nI pasted the marker",
            "user": {"login": "ann", "type": "User"},
        },
        {"id": 7, "body": "<!-- benchwatch-gate other/pr -->\nold", "user": BOT},
        {"id": 8, "body": f"{marker}\nold report", "user": BOT},
        {"id": 9, "body": "later", "user": {"login": "bob", "type": "User"}},
    ]
    github.page_size = 3

    status, _, err = run(env, replace(POST_BOTH, post_check=False))

    assert status == 3
    assert [(s.method, s.path) for s in github.seen] == [
        ("GET", "/repos/perf/bench/issues/7/comments?per_page=100"),
        ("GET", "/repos/perf/bench/issues/7/comments?per_page=3&page=2"),
        ("GET", "/repos/perf/bench/issues/7/comments?per_page=3&page=3"),
        ("PATCH", "/repos/perf/bench/issues/comments/8"),
    ]
    assert github.seen[-1].fields == {"body": github.comments[7]["body"]}
    assert github.comments[7]["body"].startswith(f"{marker}\n### ❌")
    assert github.comments[5]["body"] == f"{marker}\nI pasted the marker"
    assert github.comments[6]["body"] == "<!-- benchwatch-gate other/pr -->\nold"
    assert len(github.comments) == 9
    assert "comment posted: updated" in err

    run(env, replace(POST_BOTH, post_check=False))  # once more: still one comment of ours
    assert len(github.comments) == 9


def test_a_comment_deleted_while_listed_is_added_again(
    github: FakeGitHub, env: dict[str, str]
) -> None:
    github.comments = [{"id": 3, "body": "<!-- benchwatch-gate perf/pr -->", "user": BOT}]
    github.deleted = {3}
    _, _, err = run(env, replace(POST_BOTH, post_check=False))
    assert [s.method for s in github.seen] == ["GET", "PATCH", "POST"]
    assert "comment posted: added" in err


def test_a_named_author_s_comment_is_the_one_updated(
    github: FakeGitHub, env: dict[str, str]
) -> None:
    marker = "<!-- benchwatch-gate perf/pr -->"
    github.comments = [{"id": 3, "body": marker, "user": {"login": "perf-bot", "type": "User"}}]
    run({**env, "BENCHWATCH_COMMENT_AUTHOR": "perf-bot"}, replace(POST_BOTH, post_check=False))
    assert [s.method for s in github.seen] == ["GET", "PATCH"]


def test_pagination_is_bounded_and_stays_on_github(github: FakeGitHub, env: dict[str, str]) -> None:
    github.comments = [{"id": i, "body": "x", "user": BOT} for i in range(1, 40)]
    github.page_size = 2
    run(env, replace(POST_BOTH, post_check=False))
    gets = [s for s in github.seen if s.method == "GET"]
    assert len(gets) == COMMENT_PAGES
    assert github.seen[-1].method == "POST"  # not found within the bound: a new comment

    github.seen.clear()
    github.next_link_base = "http://localhost:9"  # another origin: the token is not sent there
    run(env, replace(POST_BOTH, post_check=False))
    assert [s.method for s in github.seen] == ["GET", "POST"]


@pytest.mark.parametrize(
    ("status", "headers", "message", "expected"),
    [
        (401, {}, "Bad credentials", "HTTP 401 Bad credentials: the token was refused"),
        (403, {}, "Resource not accessible by integration", "integration: the token may not"),
        (404, {}, "Not Found", "HTTP 404 Not Found: the repository or pull request"),
        (422, {}, "No commit found for SHA", "HTTP 422 No commit found for SHA"),
        (
            403,
            {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1767225600"},
            "API rate limit exceeded",
            "GitHub rate limit (HTTP 403): the limit resets at 1767225600",
        ),
        (429, {"retry-after": "60"}, "slow down", "GitHub rate limit (HTTP 429): retry after 60 s"),
    ],
)
def test_github_refusals_are_said_and_leave_the_status(
    github: FakeGitHub,
    env: dict[str, str],
    status: int,
    headers: dict[str, str],
    message: str,
    expected: str,
) -> None:
    github.forced = [(status, headers, {"message": message})] * 2
    exit_status, out, err = run(env)
    assert exit_status == 3
    assert "check run not posted (best effort: the gate's status stands): " in err
    assert expected in err
    assert "comment not posted" in err
    assert TOKEN not in out + err
    passing = document()
    passing["items"] = [i for i in passing["items"] if i["verdict"] != "regression"]
    github.forced = [(status, headers, {"message": message})] * 2
    assert run(env, doc=passing)[0] == 0


def test_a_token_github_echoes_is_not_printed(github: FakeGitHub, env: dict[str, str]) -> None:
    github.forced = [(422, {}, {"message": f"bad token {TOKEN}"})] * 2
    _, out, err = run(env)
    assert "HTTP 422 bad token ***" in err
    assert TOKEN not in out + err


def test_an_answer_that_is_not_json_is_still_done(github: FakeGitHub, env: dict[str, str]) -> None:
    github.forced = [(201, {}, b"<html>created</html>"), (200, {}, b"not json")]
    status, _, err = run(env)
    assert status == 3
    assert "check run posted: failure: benchwatch (perf/pr)" in err
    assert "comment posted: added: https://github.example/perf/bench/pull/7#issuecomment" in err


def test_a_wrong_token_is_refused_by_the_fake(github: FakeGitHub, env: dict[str, str]) -> None:
    _, _, err = run({**env, "GITHUB_TOKEN": "ghs_wrong"})
    assert "HTTP 401 Bad credentials" in err
    assert "ghs_wrong" not in err


def test_a_slow_github_is_given_up_on_in_bounded_time(
    github: FakeGitHub, env: dict[str, str]
) -> None:
    github.hold_s = 2.0
    started = time.monotonic()
    status, _, err = run(env, replace(POST_BOTH, timeout_s=0.3))
    assert time.monotonic() - started < 1.9
    assert status == 3
    assert "check run not posted (best effort: the gate's status stands): GitHub did not" in err
    assert "answer in time" in err


def test_an_unreachable_github_is_said(env: dict[str, str]) -> None:
    status, _, err = run({**env, "GITHUB_API_URL": "http://127.0.0.1:9"})
    assert status == 3
    assert "GitHub is unreachable (ConnectError)" in err


def test_posting_outside_a_pull_request(github: FakeGitHub, env: dict[str, str]) -> None:
    push = {**env, "GITHUB_EVENT_PATH": "", "GITHUB_REF": "refs/heads/feature-x"}
    status, _, err = run(push)
    assert status == 3
    assert github.check_runs[0]["head_sha"] == MERGE  # GITHUB_SHA: the pushed commit
    assert "comment not posted (best effort: the gate's status stands): not a pull request" in err


def test_without_a_token_nothing_is_sent(github: FakeGitHub, env: dict[str, str]) -> None:
    status, _, err = run({**env, "GITHUB_TOKEN": ""})
    assert status == 3
    assert not github.seen
    assert err.count("no GITHUB_TOKEN in the environment") == 2


def test_nothing_is_posted_unless_asked(github: FakeGitHub, env: dict[str, str]) -> None:
    assert run(env, GateOptions())[0] == 3
    assert not github.seen


def test_a_huge_report_fits_github_s_limits(github: FakeGitHub, env: dict[str, str]) -> None:
    many = [item(f"m{i}" * 20, "regression", rel_change=0.2) for i in range(2000)]
    status, _, err = run(env, doc=document(*many))
    assert status == 3
    assert "not posted" not in err
    assert "Cut to fit" in github.check_runs[0]["output"]["text"]
    assert len(github.comments[0]["body"]) <= 65_536
