"""The pull-request gate's client side: exit status, table, Markdown, summaries, and posting
to a local server that checks requests as GitHub's REST API documents them (method, path,
headers, JSON fields, limits, pagination)."""

import argparse
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
from markdown_it import MarkdownIt

from workers import gate_report as gate
from workers.gate_report import GateOptions, judge, parse_verdicts
from workers.upload_client import OK, REGRESSED, UNREACHABLE

TOKEN = "ghs_test_token_0123456789"
HEAD = "a" * 40  # the pull request's head commit
MERGE = "b" * 40  # GITHUB_SHA on a pull_request event: GitHub's merge commit
BOT = {"login": "github-actions[bot]", "type": "Bot"}


def item(model: str, verdict: str, **changes: Any) -> dict[str, Any]:
    fields = {
        "suite": "torchbench",
        "model": model,
        "config": "inductor",
        "precision": "amp",
        "mode": "inference",
        "batch_size": 32,
        "metric": "latency",
        "unit": "ms",
        "higher_is_better": False,
        "verdict": verdict,
        "new": 10.0,
        "base": 10.0,
        "rel_change": 0.0,
        "p_value": 0.5,
        "threshold": 0.05,
        "reason": "within noise",
        "series_url": f"https://bw.example/series/{len(model)}?branch=feature-x",
    }
    return {**fields, **changes}


def document(*extra: Any) -> dict[str, Any]:
    items = [
        item("resnet50", "pass"),
        item("bert", "improvement", new=9.0, rel_change=-0.1, p_value=0.0002),
        item(
            "alexnet",
            "regression",
            new=12.3,
            base=10.2,
            rel_change=0.206,
            p_value=0.0004,
            reason="20.6% slower than main at def456 (p = 0.0004)",
        ),
        *[item(f"model{i}", "pass") for i in range(9)],
        *[item(f"fresh{i}", "no_baseline", base=None, rel_change=None) for i in range(3)],
        item("broken", "error", new=None, reason="the series has no samples"),
        *extra,
    ]
    counts: dict[str, int] = {}
    for i in items:
        if isinstance(i, dict):
            counts[i["verdict"]] = counts.get(i["verdict"], 0) + 1
    return {
        "run_id": 42,
        "branch": "feature-x",
        "commit": "c" * 40,
        "default_branch": "main",
        "baseline": {"how": "merge-base", "commit": "d" * 40, "run_ids": [40, 41]},
        "counts": counts,
        "items": items,
        "url": "https://bw.example/runs/42/verdicts",
    }


def outcome(doc: dict[str, Any] | None = None, **options: Any) -> gate.Outcome:
    return judge(parse_verdicts(doc or document()), GateOptions(**options))


# ---- the gate's decision


def test_a_gating_regression_exits_3_and_the_rest_never_fail() -> None:
    judged = outcome()
    assert judged.exit_status == gate.GATE_FAILED == REGRESSED == 3
    assert [i.model for i in judged.gating] == ["alexnet"]
    assert judged.conclusion == "failure"
    assert dict(judged.counts) == {
        "regression": 1,
        "improvement": 1,
        "error": 1,
        "no_baseline": 3,
        "pass": 10,
    }


def test_no_baseline_and_errors_pass() -> None:
    doc = document()
    doc["items"] = [i for i in doc["items"] if i["verdict"] != "regression"]
    judged = outcome(doc)
    assert judged.exit_status == gate.PASSED == OK
    assert judged.conclusion == "success"
    assert judged.counts["error"] == 1
    assert "errors and missing baselines never fail the gate" in gate.render_table(judged)


def test_report_only_says_what_would_have_failed_and_passes() -> None:
    judged = outcome(report_only=True)
    assert judged.exit_status == 0
    assert judged.conclusion == "neutral"
    assert gate.headline(judged) == "report only: would have failed on 1 regression"


@pytest.mark.parametrize(
    ("options", "status"),
    [
        ({"suites": ("torchbench",)}, 3),
        ({"suites": ("torch*",)}, 3),
        ({"suites": ("huggingface",)}, 0),
        ({"metrics": ("latency",)}, 3),
        ({"metrics": ("compile_*", "memory")}, 0),
        ({"suites": ("torchbench",), "metrics": ("memory",)}, 0),
        ({"suites": ("TorchBench",)}, 0),  # case-sensitive, as names are stored
    ],
)
def test_gating_can_be_limited_by_suite_and_metric_globs(
    options: dict[str, Any], status: int
) -> None:
    assert outcome(**options).exit_status == status


def test_a_regression_outside_the_gate_is_shown_as_not_gating() -> None:
    judged = outcome(suites=("huggingface",))
    table = gate.render_table(judged)
    assert "not gating" in table
    assert "warning: --gate-suite huggingface matches no benchmark" in table
    assert "none gating" in table
    markdown = gate.render_markdown(judged)
    assert "🟡 regression, not gating" in markdown
    assert markdown.startswith("### ✅ benchwatch: passed")


def test_an_unknown_or_unreadable_verdict_is_an_error_not_a_failure() -> None:
    doc = document({**item("odd", "slower"), "verdict": "slower"}, "not an object")
    doc["items"] = [i for i in doc["items"] if not isinstance(i, dict) or i["model"] != "alexnet"]
    judged = outcome(doc)
    assert judged.exit_status == 0
    assert judged.counts["error"] == 3
    reasons = [i.reason for i in judged.report.items if i.verdict == "error"]
    assert any("unknown verdict 'slower'" in r for r in reasons)
    assert any("not an object" in r for r in reasons)


@pytest.mark.parametrize("answer", [None, [], {"items": "x"}, {"run_id": 1}])
def test_no_verdicts_document_is_no_verdict(answer: object) -> None:
    err = io.StringIO()
    assert gate.run_gate(answer, GateOptions(), {}, io.StringIO(), err) == UNREACHABLE == 2
    assert "no verdict" in err.getvalue()


def test_the_flags_make_the_options() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--channel")
    gate.add_gate_arguments(parser)
    args = ["--gate-suite", "torchbench", "--gate-suite", "hf_*", "--gate-metric", "latency"]
    args += ["--report-only", "--post-check", "--summary-file", "s.md", "--channel", "nightly"]
    options = gate.gate_options(parser.parse_args(args))
    assert options == GateOptions(
        suites=("torchbench", "hf_*"),
        metrics=("latency",),
        report_only=True,
        summary_file="s.md",
        post_check=True,
        channel="nightly",
    )
    assert gate.gate_options(parser.parse_args([])) == GateOptions()
    for action in parser._actions[2:]:
        assert "(default: " in (action.help or ""), action.option_strings


# ---- the terminal table


def test_the_table_lists_regressions_then_improvements_then_errors_aligned() -> None:
    table = gate.render_table(outcome())
    lines = table.splitlines()
    assert lines[0] == (f"benchwatch gate, run 42 (feature-x {'c' * 12}): failed: 1 regression")
    assert lines[1] == f"compared with main at {'d' * 12} (the merge base; runs 40, 41)"
    rows = [line for line in lines if line.startswith("  ")]
    assert [r.split()[0] for r in rows] == ["verdict", "regression", "improvement", "error"]
    assert "+20.6%" in rows[1]
    assert "4.0e-04" in rows[1]
    assert "the series has no samples" in rows[3]
    # Aligned: each column starts at the same place on every row.
    starts = {r.index("torchbench/") for r in rows[1:]}
    assert starts == {rows[0].index("benchmark")}
    assert len({r.index("%") for r in rows[1:3]}) == 1
    assert "1 regression · 1 improvement · 1 error · 3 no baseline · 10 pass" in table
    assert "resnet50" not in table  # passes are counted, not listed
    assert table.endswith("all verdicts: https://bw.example/runs/42/verdicts\n")


def test_the_table_caps_its_rows() -> None:
    slower = [item(f"slow{i}", "regression", rel_change=0.1 + i / 100) for i in range(30)]
    table = gate.render_table(outcome(document(*slower)), max_rows=5)
    rows = [line for line in table.splitlines() if line.startswith("  ")]
    assert len(rows) == 1 + 5 + 1
    assert rows[-1] == "  and 28 more"
    assert "slow29" in rows[1]  # the largest change first


def test_the_terminal_gets_no_escape_sequences() -> None:
    hostile = item("\x1b[2J\x1b[31mevil\u202egnp.exe\nnext", "regression", reason="\x07bell")
    table = gate.render_table(outcome(document(hostile)))
    assert "\x1b" not in table
    assert "\u202e" not in table
    assert "\x07" not in table
    assert all(line.isprintable() for line in table.splitlines())


def test_the_server_listing_only_some_verdicts_is_said() -> None:
    doc = document()
    doc["counts"] = {"pass": 500, "regression": 1}
    assert "the server listed 16 of 501 verdicts" in gate.render_table(outcome(doc))


# ---- Markdown


def render(markdown: str) -> str:
    return MarkdownIt("commonmark").enable("table").render(markdown)


def test_the_markdown_summary() -> None:
    markdown = gate.render_markdown(outcome())
    assert markdown.startswith("### ❌ benchwatch: failed: 1 regression on feature\\-x\n")
    assert "compared with main at dddddddddddd (the merge base; runs 40, 41)" in markdown
    page = render(markdown)
    assert page.count("<table>") == 2
    main, rest = page.split("<details>")
    assert "🔴 regression" in main
    assert "10.2 → 12.3" in main
    assert "+20.6%" in main
    assert "🟢 improvement" in main
    assert '<a href="https://bw.example/series/7?branch=feature-x">torchbench/alexnet' in main
    assert "resnet50" not in main
    assert "<summary>14 more (1 error, 3 no baseline, 10 pass)</summary>" in rest
    assert "the series has no samples" in rest
    assert "All verdicts for run 42" in page


def test_report_only_markdown() -> None:
    markdown = gate.render_markdown(outcome(report_only=True))
    assert markdown.startswith("### ⚠️ benchwatch: report only: would have failed on 1")


def test_no_baseline_at_all() -> None:
    doc = document()
    doc["baseline"] = {"how": "none", "commit": None, "run_ids": []}
    doc["items"] = [item("x", "no_baseline")]
    judged = outcome(doc)
    assert judged.exit_status == 0
    assert "no baseline on main to compare with" in gate.render_table(judged)
    assert "<table>" in render(gate.render_markdown(judged))  # inside the details


def test_hostile_names_cannot_inject_markdown_html_links_or_mentions() -> None:
    hostile = item(
        "<img src=x onerror=alert(1)> | @perf/admins [x](javascript:alert(1))\n# head `code`",
        "regression",
        unit="ms</td><script>",
        reason="**bold** <details><summary>x",
        series_url="javascript:alert(2)",
    )
    doc = document(hostile)
    doc["branch"] = "main](https://evil.example) <b>"
    page = render(gate.render_markdown(outcome(doc)))
    assert "<img" not in page
    assert "<script" not in page
    assert "<b>" not in page
    assert "<strong>" not in page
    assert "<h1>" not in page
    assert "<code>" not in page
    assert "javascript" not in " ".join(re.findall(r'href="([^"]*)"', page))
    assert "evil.example" not in " ".join(re.findall(r'href="([^"]*)"', page))
    assert "@perf/admins" not in page
    assert page.count("<details>") == 1
    # The pipe stayed inside its cell: every row of the first table has six cells.
    first = page.split("<details>")[0]
    assert all(row.count("<td") == 6 for row in first.split("<tr>")[2:])


def test_a_long_report_is_cut_to_the_limit_with_a_note() -> None:
    many = [item(f"m{i}" * 20, "pass") for i in range(2000)]
    judged = outcome(document(*many))
    whole = gate.render_markdown(judged)
    assert len(whole.encode()) > gate.COMMENT_CHARS
    cut = gate.render_markdown(judged, gate.COMMENT_CHARS, "<!-- benchwatch-gate perf -->")
    assert len(cut.encode()) <= gate.COMMENT_CHARS
    assert cut.startswith("<!-- benchwatch-gate perf -->\n### ❌")
    assert "Cut to fit GitHub's limit of 65536 bytes" in cut
    assert "[All verdicts](https://bw.example/runs/42/verdicts)" in cut
    page = render(cut)
    assert page.count("<details>") == page.count("</details>") == 1
    assert "🔴 regression" in page  # what matters comes first


# ---- summaries


def test_the_step_summary_is_appended(tmp_path: Path) -> None:
    summary = tmp_path / "step_summary"
    summary.write_text("## earlier step\n")
    notes = gate.write_step_summary("# report\n", {"GITHUB_STEP_SUMMARY": str(summary)})
    assert summary.read_text() == "## earlier step\n\n# report\n"
    assert notes == [f"summary appended to {summary}"]


def test_the_step_summary_stays_within_github_s_limit(tmp_path: Path) -> None:
    summary = tmp_path / "step_summary"
    summary.write_text("x" * (gate.STEP_SUMMARY_BYTES - 50_000))
    many = [item(f"m{i}" * 20, "pass") for i in range(2000)]
    markdown = gate.render_markdown(outcome(document(*many)))
    gate.write_step_summary(markdown, {"GITHUB_STEP_SUMMARY": str(summary)})
    size = summary.stat().st_size
    assert gate.STEP_SUMMARY_BYTES - 50_000 < size <= gate.STEP_SUMMARY_BYTES
    assert "Cut to fit" in summary.read_text()


def test_a_full_step_summary_is_left_alone(tmp_path: Path) -> None:
    summary = tmp_path / "step_summary"
    summary.write_text("x" * gate.STEP_SUMMARY_BYTES)
    notes = gate.write_step_summary("# report\n", {"GITHUB_STEP_SUMMARY": str(summary)})
    assert summary.stat().st_size == gate.STEP_SUMMARY_BYTES
    assert "near GitHub's 1 MiB" in notes[0]


def test_gitlab_gets_a_summary_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert gate.write_step_summary("# one\n", {"GITLAB_CI": "true"}) == [
        "summary written to benchwatch-summary.md"
    ]
    gate.write_step_summary("# two\n", {"GITLAB_CI": "true"})
    assert (tmp_path / "benchwatch-summary.md").read_text() == "# two\n"
    chosen = {"GITLAB_CI": "true", "BENCHWATCH_SUMMARY_FILE": str(tmp_path / "env.md")}
    gate.write_step_summary("# three\n", chosen)
    assert (tmp_path / "env.md").read_text() == "# three\n"
    gate.write_step_summary("# four\n", chosen, summary_file=str(tmp_path / "flag.md"))
    assert (tmp_path / "flag.md").read_text() == "# four\n"


def test_outside_ci_no_summary_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert gate.write_step_summary("# report\n", {}) == []
    assert not list(tmp_path.iterdir())


def test_a_summary_that_cannot_be_written_is_reported(tmp_path: Path) -> None:
    env = {"GITHUB_STEP_SUMMARY": str(tmp_path / "missing" / "summary")}
    (note,) = gate.write_step_summary("# report\n", env)
    assert note.startswith("step summary not written:")


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
    context = gate.github_context(env)
    assert isinstance(context, gate.GitHubContext)
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
    context = gate.github_context(env)
    assert isinstance(context, gate.GitHubContext)
    assert (context.pull_number, context.head_sha) == (9, MERGE)
    assert context.api_url == "https://ghe.example/api/v3"
    push = gate.github_context({**env, "GITHUB_REF": "refs/heads/feature-x"})
    assert isinstance(push, gate.GitHubContext)
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
    context = gate.github_context(env)
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
    status = gate.run_gate(doc or document(), options, env, out, err)
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
    assert len(gets) == gate.COMMENT_PAGES
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
