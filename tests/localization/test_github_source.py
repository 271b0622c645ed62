"""GitHub's compare API as a localization's commit source (issue 28 point 5, "or GitHub's
compare API with a token").

A real local HTTP server stands in for GitHub: its REST API (at ``/api/v3``, as an Enterprise
server's) answers from a real git repository, the tiny package's sixteen commits
(``tinypkg.make``): the repository, a ref as ``application/vnd.github.sha``, and comparisons
paged as GitHub pages them (earliest first, ``Link: rel="next"``); it checks the token on
every API request. It also serves the repository for ``git clone`` (git's dumb HTTP: a bare
copy's files), at the ``clone_url`` its API gives, as GitHub serves clones beside its API.
Its commits' ``html_url`` name github.com, as GitHub's do; the local clone's origin is set to
the same repository, so both sources give the same links.

The bisection is driven through ``Search``: with a test oracle (the real ``Oracle``'s
bookkeeping, each environment measured by the commit it names) the GitHub source names the
culprit the local clone names, with the same title, author, date and link; with the real
oracle, an operator's provider clones the ``source`` URL the spec gives and builds the commit.
The refusals (401, 403, 404, rate limits), hostile answers, caps and timeouts are each a
``GitHubError`` saying which, and through the worker's task a failed localization with it.
"""

import contextlib
import json
import math
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import numpy as np
import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr, ValidationError

from app.core.command_suites import CommandSuite
from app.core.config import Settings
from app.core.db import Database
from app.core.providers import EnvSpec, Provider
from app.localization.lifecycle import Costs, ProbeRow
from app.main import create_app
from tests.conftest import PEPPER
from tests.localization import tinypkg
from tests.localization.test_worker import MACHINE, asked, nightlies
from tests.localization.tinypkg import BROKEN, COMMAND, COMMITS, SLOW, SUITE, Tiny, git
from workers.clones import Clone
from workers.github_commits import GitHubError, GitHubRepository, commit_source
from workers.localize import Measuring, Oracle, Search
from workers.providers import Environments
from workers.tasks import localize as task

OWNER, REPO = "acme", "tinypkg"
TOKEN = "ghp_test-token-never-shown"
WEB = f"https://github.com/{OWNER}/{REPO}"
CASE = {
    "suite": SUITE,
    "model": tinypkg.MODEL,
    "category": "",
    "mode": "inference",
    "precision": "fp32",
    "config": "eager",
    "batch_size": None,
    "params": {},
    "metric": "latency",
    "unit": "ms",
    "higher_is_better": False,
}
# What the fake answers in place of GitHub's own, for a request's path (None: as GitHub would).
Scripted = Callable[[str, dict[str, list[str]]], tuple[int, dict[str, str], bytes] | None]


@dataclass
class FakeGitHub:
    """GitHub's REST API and git clones of one repository, answered from a real clone."""

    repo: Path
    bare: Path
    root: str = ""
    requests: list[tuple[str, dict[str, list[str]], dict[str, str]]] = field(default_factory=list)
    script: Scripted = lambda path, query: None
    hold_s: float = 0.0

    @property
    def api(self) -> str:
        return f"{self.root}/api/v3"

    @property
    def clone_url(self) -> str:
        return f"{self.root}/{OWNER}/{REPO}.git"

    def source(self, token: str = TOKEN, **limits: Any) -> GitHubRepository:
        return GitHubRepository(OWNER, REPO, api_url=self.api, token=SecretStr(token), **limits)

    def api_requests(self) -> list[tuple[str, dict[str, list[str]], dict[str, str]]]:
        return [r for r in self.requests if r[0].startswith("/api/v3/")]

    def respond(
        self, path: str, query: dict[str, list[str]], headers: dict[str, str]
    ) -> tuple[int, dict[str, str], bytes]:
        """A request's status, headers and body: scripted, a clone's file, or the API's."""
        if (scripted := self.script(path, query)) is not None:
            return scripted
        if path.startswith(f"/{OWNER}/{REPO}.git/"):
            served = (self.bare / path.removeprefix(f"/{OWNER}/{REPO}.git/")).resolve()
            if not served.is_file() or self.bare.resolve() not in served.parents:
                return 404, {}, b""
            return 200, {"content-type": "application/octet-stream"}, served.read_bytes()
        if not path.startswith("/api/v3/"):
            return _reply(404, {"message": "Not Found"})
        if headers.get("authorization") != f"Bearer {TOKEN}":
            return _reply(401, {"message": "Bad credentials"})
        status, body = self.answer(path.removeprefix("/api/v3"), query, headers.get("accept", ""))
        if isinstance(body, str):
            return status, {"content-type": "text/plain"}, body.encode()
        if isinstance(body, tuple):
            document, link = body
            return _reply(status, document, **({"link": link} if link else {}))
        return _reply(status, body)

    def answer(self, path: str, query: dict[str, list[str]], accept: str) -> tuple[int, Any]:
        """GitHub's status and JSON (or text) for an API path under /repos/OWNER/REPO."""
        prefix = f"/repos/{OWNER}/{REPO}"
        if path == prefix:
            full = f"{OWNER}/{REPO}"
            return 200, {"full_name": full, "html_url": WEB, "clone_url": self.clone_url}
        if path.startswith(f"{prefix}/commits/"):
            sha = self.sha(unquote(path.removeprefix(f"{prefix}/commits/")))
            if sha is None:
                return 422, {"message": "No commit found for SHA"}
            return (200, sha) if accept == "application/vnd.github.sha" else (200, self.commit(sha))
        if path.startswith(f"{prefix}/compare/"):
            base, _, head = unquote(path.removeprefix(f"{prefix}/compare/")).partition("...")
            return self.compare(base, head, query)
        return 404, {"message": "Not Found"}

    def sha(self, ref: str) -> str | None:
        if not ref or ref.startswith("-"):
            return None
        found = tinypkg_git(self.repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
        return found or None

    def commit(self, sha: str) -> dict[str, Any]:
        fields = tinypkg_git(
            self.repo, "log", "-1", "--format=%an%x1f%ae%x1f%at%x1f%cn%x1f%ce%x1f%ct%x1f%B", sha
        ).split("\x1f")
        name, email, at, committer, committer_email, ct, message = fields
        return {
            "sha": sha,
            "html_url": f"{WEB}/commit/{sha}",
            "commit": {
                "message": message.strip(),
                "author": {"name": name, "email": email, "date": _utc(at)},
                "committer": {"name": committer, "email": committer_email, "date": _utc(ct)},
            },
            "author": {"login": "a-developer", "id": 1},  # the author's GitHub account
        }

    def compare(self, base: str, head: str, query: dict[str, list[str]]) -> tuple[int, Any]:
        base_sha, head_sha = self.sha(base), self.sha(head)
        if base_sha is None or head_sha is None:
            return 404, {"message": "Not Found"}
        merge_base = tinypkg_git(self.repo, "merge-base", base_sha, head_sha)
        listed = tinypkg_git(self.repo, "rev-list", "--reverse", f"{base_sha}..{head_sha}").split()
        behind = tinypkg_git(self.repo, "rev-list", f"{head_sha}..{base_sha}").split()
        status = (
            "identical"
            if base_sha == head_sha
            else "ahead"
            if merge_base == base_sha
            else "behind"
            if merge_base == head_sha
            else "diverged"
        )
        if "per_page" in query or "page" in query:
            per_page = int(query.get("per_page", ["250"])[0])
            page = int(query.get("page", ["1"])[0])
            shown = listed[(page - 1) * per_page : page * per_page]
            more = page * per_page < len(listed)
        else:  # no paging parameter: GitHub's newest 250
            page, per_page, shown, more = 1, 250, listed[-250:], False
        body = {
            "status": status,
            "ahead_by": len(listed),
            "behind_by": len(behind),
            "total_commits": len(listed),
            "merge_base_commit": {"sha": merge_base},
            "commits": [self.commit(sha) for sha in shown],
            "files": [{"filename": "tinypkg/__init__.py", "status": "modified"}]
            if page == 1
            else [],
        }
        link = None
        if more:
            path = f"{self.api}/repos/{OWNER}/{REPO}/compare/{base}...{head}"
            link = f'<{path}?per_page={per_page}&page={page + 1}>; rel="next"'
        return 200, (body, link)


def tinypkg_git(repo: Path, *args: str) -> str:
    """A git command's output in ``repo`` ("" where it failed: an unknown ref)."""
    try:
        return git(repo, *args)
    except AssertionError:
        return ""


def _utc(epoch: str) -> str:
    return datetime.fromtimestamp(int(epoch), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@contextmanager
def serving(hub: FakeGitHub) -> Iterator[FakeGitHub]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            query = parse_qs(parts.query)
            headers = {k.lower(): v for k, v in self.headers.items()}
            hub.requests.append((parts.path, query, headers))
            time.sleep(hub.hold_s)
            status, sent, body = hub.respond(parts.path, query, headers)
            self.send_response(status)
            for name, value in sent.items():
                self.send_header(name, value)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            # The client may have given up: past its timeout, or its cap on the body.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    hub.root = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Tiny:
    """The tiny package's repository, its origin the GitHub repository, c0 tagged v0.1."""
    made = tinypkg.make(tmp_path_factory.mktemp("tiny"))
    git(made.repo, "remote", "add", "origin", f"{WEB}.git")
    git(made.repo, "tag", "v0.1", made.commits[0])
    return made


@pytest.fixture(scope="module")
def bare(tiny: Tiny, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bare copy that git's dumb HTTP clones from (its files served as they are)."""
    path = tmp_path_factory.mktemp("served") / f"{REPO}.git"
    git(tiny.repo, "clone", "-q", "--bare", str(tiny.repo), str(path))
    git(path, "update-server-info")
    return path


@pytest.fixture
def hub(tiny: Tiny, bare: Path) -> Iterator[FakeGitHub]:
    with serving(FakeGitHub(tiny.repo, bare)) as served:
        yield served


class Seeded(Oracle):
    """The real oracle's bookkeeping; an environment is "built" and measured by its commit.

    From the slow commit on the case is 40% slower (2% noise, a seeded generator: two searches
    that probe the same commits in the same order see the same samples); the broken commit
    does not build.
    """

    def __init__(self, measuring: Measuring, tiny: Tiny) -> None:
        super().__init__(measuring, CASE)
        self.tiny = tiny
        self.rng = np.random.default_rng(28)
        self.specs: list[EnvSpec] = []

    def _prepare(self, spec: EnvSpec) -> Any:
        self.specs.append(spec)
        if self._index(spec) == BROKEN:
            return "does not build: setup.py raised"
        return spec

    def _run(self, prepared: Any, settings: Any) -> tuple[list[float], None]:
        level = 1.4 if self._index(prepared) >= SLOW else 1.0
        return [float(x) for x in self.rng.normal(level, 0.02 * level, 10)], None

    def _index(self, spec: EnvSpec) -> int:
        return self.tiny.commits.index(spec.components["tinypkg"].commit or "")


def measuring(tiny: Tiny, root: Path, provider: str = "pip", **providers: Provider) -> Measuring:
    environments = Environments(root=root, budget_bytes=2**30, providers=providers)
    suite = CommandSuite.model_validate(tiny.command_suite())
    return Measuring(environments, provider, suite, MACHINE, "cpu", 120, 2**24, 30)


def searched(oracle: Oracle, tiny: Tiny, source: Any) -> tuple[Any, list[ProbeRow]]:
    rows: list[ProbeRow] = []

    def report(row: ProbeRow, costs: Costs) -> None:
        rows.append(row)

    good, bad = {"tinypkg": tiny.version(0)}, {"tinypkg": tiny.version(COMMITS - 1)}
    return Search(oracle, good, bad, {"tinypkg": source}, report).run(), rows


def test_the_github_source_names_the_culprit_the_local_clone_names(
    tiny: Tiny, hub: FakeGitHub, tmp_path: Path
) -> None:
    by_clone, clone_rows = searched(Seeded(measuring(tiny, tmp_path), tiny), tiny, str(tiny.repo))
    oracle = Seeded(measuring(tiny, tmp_path), tiny)
    by_github, github_rows = searched(oracle, tiny, hub.source(per_page=4))

    assert by_github.state == by_clone.state == "culprit_found", by_github.reason
    culprit, expected = by_github.answer["culprit"], by_clone.answer["culprit"]
    sha = tiny.commits[SLOW]
    assert culprit["commit"] == sha
    assert culprit["title"] == f"Do more work in op (revision {SLOW})"
    assert culprit["author"] == "A Developer <dev@example.com>"
    assert culprit["link"] == f"{WEB}/commit/{sha}"  # the commit's html_url
    assert culprit.pop("author_login") == "a-developer"  # a clone knows no GitHub account
    # GitHub gives the date in UTC, the clone in the committer's offset: the same instant.
    assert datetime.fromisoformat(culprit.pop("date")) == datetime.fromisoformat(
        expected.pop("date")
    )
    assert culprit == expected
    assert by_github.answer["commits"] == by_clone.answer["commits"] == COMMITS - 1
    assert by_github.costs == by_clone.costs
    assert [(r.label, r.outcome) for r in github_rows] == [(r.label, r.outcome) for r in clone_rows]
    assert any(r.outcome == "build_failed" for r in github_rows)  # the broken commit, skipped
    # Every spec names the commit and the repository's clone URL, for the provider to build.
    sources = {s.components["tinypkg"].source for s in oracle.specs}
    assert sources == {hub.clone_url}
    # The comparison was read in pages of 4, following Link; each API request with the token.
    pages = [q["page"] for path, q, _ in hub.api_requests() if "/compare/" in path and "page" in q]
    assert pages == [["1"], ["2"], ["3"], ["4"]]
    assert {h.get("authorization") for _, _, h in hub.api_requests()} == {f"Bearer {TOKEN}"}


def test_versions_shas_and_tags_name_the_same_commits_as_in_the_clone(
    tiny: Tiny, hub: FakeGitHub
) -> None:
    clone, github = Clone(str(tiny.repo)), hub.source()
    recorded = [
        tiny.commits[3],  # a full sha recorded beside the version
        tiny.commits[3][:10],  # a short one
        "v0.1",  # a tag
        tiny.version(9),  # a version that names its commit (0.1.dev9+g1a2b3c4)
        "2.6.0.dev20241112+cu124",  # a nightly: no commit of its own
        "v9.9",  # a tag the repository does not have
    ]
    found = [github.commit_of(value) for value in recorded]
    assert found == [clone.commit_of(value) for value in recorded]
    assert found == [tiny.commits[3], tiny.commits[3], tiny.commits[0], tiny.commits[9], None, None]
    assert github.path == hub.clone_url
    # A commit outside any range read so far is asked for by itself.
    described, expected = github.describe(tiny.commits[9]), clone.describe(tiny.commits[9])
    assert datetime.fromisoformat(described.pop("date")) == datetime.fromisoformat(
        expected.pop("date")
    )
    assert described == expected | {"author_login": "a-developer"}
    assert github.between(tiny.commits[2], tiny.commits[6]) == clone.between(
        tiny.commits[2], tiny.commits[6]
    )


def test_a_range_that_is_no_range_says_why(tiny: Tiny, hub: FakeGitHub) -> None:
    github = hub.source()
    backwards = github.between(tiny.commits[9], tiny.commits[2])
    assert backwards == f"{tiny.commits[2]} does not descend from {tiny.commits[9]} in " + (
        f"github:{OWNER}/{REPO} (behind)"
    )
    same = github.between(tiny.commits[4], tiny.commits[4])
    assert isinstance(same, str)
    assert "(identical)" in same
    # More commits than a bisection reads: not bisected, saying so (the component stands).
    capped = hub.source(max_commits=8).between(tiny.commits[0], tiny.commits[15])
    assert capped == (
        f"15 commits from {tiny.commits[0][:12]} to {tiny.commits[15][:12]} in "
        f"github:{OWNER}/{REPO}: more than the 8 a bisection reads; not bisected"
    )
    assert hub.source(max_commits=15, per_page=5).between(tiny.commits[0], tiny.commits[15]) == (
        tiny.commits
    )


def _reply(status: int, body: Any, **headers: str) -> tuple[int, dict[str, str], bytes]:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return status, {"content-type": "application/json"} | headers, content


def _on(part: str, answer: tuple[int, dict[str, str], bytes]) -> Scripted:
    return lambda path, query: answer if part in path else None


REFUSALS = {
    "wrong token": (None, "refused the token (401 Bad credentials): set BENCHWATCH_LOCALIZE"),
    "repository": (
        _on(f"/repos/{OWNER}/{REPO}", _reply(404, {"message": "Not Found"})),
        "GitHub does not show the repository (404 Not Found), or the token cannot read it",
    ),
    "rate limit": (
        _on(
            "/api/v3/",
            _reply(
                403,
                {"message": "API rate limit exceeded for 10.0.0.1."},
                **{"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1790000000"},
            ),
        ),
        "GitHub's rate limit is spent (API rate limit exceeded for 10.0.0.1.): it resets at "
        "2026-09-21T14:13:20+00:00",
    ),
    "secondary rate limit": (
        _on("/api/v3/", _reply(429, {"message": "secondary rate limit"}, **{"retry-after": "60"})),
        "GitHub's rate limit (secondary rate limit): try again in 60 s",
    ),
    "forbidden": (
        _on("/api/v3/", _reply(403, {"message": "Resource not accessible by integration"})),
        "GitHub forbids reading the repository (403 Resource not accessible by integration)",
    ),
    "server error": (
        _on("/api/v3/", _reply(502, b"<html>bad gateway</html>")),
        "GitHub answered 502 for the repository (<html>bad gateway</html>)",
    ),
    "clone_url": (
        _on(
            f"/repos/{OWNER}/{REPO}",
            _reply(200, {"full_name": "a/b", "clone_url": "file:///etc/passwd"}),
        ),
        "its clone_url 'file:///etc/passwd' is no URL",
    ),
    "repository of the wrong type": (
        _on(f"/repos/{OWNER}/{REPO}", _reply(200, {"full_name": "a/b", "clone_url": 7})),
        "the repository: GitHub's answer is not as its API documents (clone_url: Input should "
        "be a valid string)",
    ),
    "not json": (
        _on(f"/repos/{OWNER}/{REPO}", _reply(200, b"<html>sign in</html>")),
        "GitHub's answer is not as its API documents (the answer: Invalid JSON",
    ),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_what_github_refuses_or_garbles_is_an_error_saying_which(
    case: str, tiny: Tiny, hub: FakeGitHub
) -> None:
    script, message = REFUSALS[case]
    if script is not None:
        hub.script = script
    source = hub.source("ghp_wrong" if case == "wrong token" else TOKEN)
    with pytest.raises(GitHubError) as raised:
        source.commit_of(tiny.version(3))
    assert message in str(raised.value)
    assert str(raised.value).startswith(f"github:{OWNER}/{REPO}: ")
    assert TOKEN not in str(raised.value)
    assert "ghp_wrong" not in str(raised.value)
    assert TOKEN not in repr(source)


def test_without_a_token_github_asks_for_one(tiny: Tiny, hub: FakeGitHub) -> None:
    with pytest.raises(GitHubError, match=r"GitHub asks for a token \(401 Bad credentials\)"):
        hub.source("").commit_of(tiny.version(3))
    assert "authorization" not in hub.requests[0][2]


def _compare_page(hub: FakeGitHub, tiny: Tiny, change: Callable[[dict[str, Any]], Any]) -> None:
    """Serve the comparison's first page changed by ``change`` (GitHub's otherwise)."""

    def script(path: str, query: dict[str, list[str]]) -> Any:
        if "/compare/" not in path:
            return None
        _, (body, _) = hub.compare(tiny.commits[0], tiny.commits[15], query)
        changed = change(body)
        return _reply(200, changed if changed is not None else body)

    hub.script = script


HOSTILE = {
    "a sha that is a number": (
        lambda body: body["commits"][2].update(sha=12345),
        "(commits.2.sha: Input should be a valid string)",
    ),
    "a sha that is no sha": (
        lambda body: body["commits"][0].update(sha="HEAD"),
        "(commits.0.sha: String should match pattern",
    ),
    "a count as a string": (
        lambda body: body.update(total_commits="15"),
        "(total_commits: Input should be a valid integer)",
    ),
    "an unknown status": (
        lambda body: body.update(status="sideways"),
        "(status: Input should be 'ahead', 'behind', 'identical' or 'diverged')",
    ),
    "commits that are an object": (
        lambda body: body.update(commits={"sha": "x"}),
        "(commits: Input should be a valid array)",
    ),
    "a list for the answer": (
        lambda body: [body],
        "(the answer: Input should be an object)",
    ),
    "a message that is a number": (
        lambda body: body["commits"][1]["commit"].update(message=3),
        "(commits.1.commit.message: Input should be a valid string)",
    ),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_comparison_in_a_shape_github_does_not_document_is_an_error(
    case: str, tiny: Tiny, hub: FakeGitHub
) -> None:
    change, message = HOSTILE[case]
    _compare_page(hub, tiny, change)
    with pytest.raises(GitHubError) as raised:
        hub.source().between(tiny.commits[0], tiny.commits[15])
    assert f"the comparison {tiny.commits[0]}...{tiny.commits[15]}: GitHub's answer" in str(
        raised.value
    )
    assert message in str(raised.value)


def test_a_hostile_title_or_link_is_cut_or_left_out(tiny: Tiny, hub: FakeGitHub) -> None:
    def change(body: dict[str, Any]) -> None:
        for commit in body["commits"]:
            commit["html_url"] = "javascript:alert(1)"
            commit["commit"]["message"] = "x" * 5000 + "\n\nbody"
            commit["author"] = {"login": "<b>@everyone</b>"}
        return None

    _compare_page(hub, tiny, change)
    github = hub.source()
    commits = github.between(tiny.commits[0], tiny.commits[15])
    assert commits == tiny.commits
    described = github.describe(tiny.commits[9])
    assert "link" not in described
    assert "author_login" not in described
    assert described["title"] == "x" * 200


def test_the_caps_and_the_timeout_are_errors_too(tiny: Tiny, hub: FakeGitHub) -> None:
    with pytest.raises(GitHubError, match="answered more than 2000 bytes"):
        hub.source(max_bytes=2000).between(tiny.commits[0], tiny.commits[15])
    hub.hold_s = 1.0
    with pytest.raises(GitHubError, match="could not be read: ReadTimeout"):
        hub.source(timeout_s=0.2).commit_of(tiny.commits[3])
    hub.hold_s = 0.0

    def elsewhere(path: str, query: dict[str, list[str]]) -> Any:
        if "/compare/" not in path:
            return None
        _, (body, _) = hub.compare(tiny.commits[0], tiny.commits[15], query)
        return _reply(200, body, link='<http://198.51.100.7/api/v3/next?page=2>; rel="next"')

    hub.script = elsewhere
    with pytest.raises(GitHubError, match="the next page is at another address"):
        hub.source(per_page=4).between(tiny.commits[0], tiny.commits[15])
    assert not any("198.51.100.7" in path for path, _, _ in hub.requests)


def test_the_settings_take_github_sources_and_refuse_bad_ones() -> None:
    made = Settings(
        LOCALIZE_SOURCES={"torch": "github:pytorch/pytorch", "tinypkg": "/srv/tinypkg"},
        LOCALIZE_GITHUB_API_URL="https://ghe.example.com/api/v3/",
        LOCALIZE_GITHUB_TOKEN=TOKEN,
    )
    github = commit_source(made.LOCALIZE_SOURCES["torch"], made)
    assert isinstance(github, GitHubRepository)
    assert (github.owner, github.repo, github.api_url) == (
        "pytorch",
        "pytorch",
        "https://ghe.example.com/api/v3",
    )
    assert isinstance(commit_source(made.LOCALIZE_SOURCES["tinypkg"], made), Clone)
    assert TOKEN not in repr(made) + str(made.model_dump()) + repr(github)
    for value in ("github:", "github:pytorch", "github:-x/y", "github:a/..", "github:a/b/c"):
        with pytest.raises(ValidationError, match=r"LOCALIZE_SOURCES\['torch'\]: .* is not github"):
            Settings(LOCALIZE_SOURCES={"torch": value})
    with pytest.raises(
        ValidationError, match=r"is not an absolute path \(a local clone\) or github"
    ):
        Settings(LOCALIZE_SOURCES={"torch": "gh:pytorch/pytorch"})
    with pytest.raises(ValidationError, match="LOCALIZE_GITHUB_API_URL: 'ftp://x' is not an http"):
        Settings(LOCALIZE_GITHUB_API_URL="ftp://x")


# An operator's source-build provider for a GitHub source: it clones the URL the spec gives
# beside the commit (here from the test server, as git clones GitHub), then builds the commit
# as the pip provider builds one of a local clone.
PROVIDER = r"""
import json, os, subprocess, sys
from pathlib import Path
from app.core.providers import Component, EnvSpec
from workers.pip_provider import PipBuild

spec = EnvSpec.model_validate_json(sys.stdin.read())
entry = Path(os.environ["BENCHWATCH_ENV_DIR"])
components = {}
for name, component in spec.components.items():
    if component.commit and component.source and component.source.startswith("http"):
        clone = entry / f"{name}-clone"
        argv = ["git", "clone", "-q", "--no-checkout", component.source, str(clone)]
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode != 0:
            print(json.dumps({"unbuildable": f"git clone failed: {done.stderr[-300:]}"}))
            sys.exit(0)
        component = Component(commit=component.commit, source=str(clone))
    components[name] = component
build = PipBuild(EnvSpec(components=components), entry, lambda: True, 20.0,
                 find_links=[], timeout_s=300)
print(json.dumps(build.run().answer))
"""


@pytest.mark.slow
def test_a_provider_builds_each_commit_from_the_repository_url(
    tiny: Tiny, hub: FakeGitHub, tmp_path: Path
) -> None:
    script = tmp_path / "build-from-github.py"
    script.write_text(PROVIDER)
    provider = Provider(command=[sys.executable, str(script)], timeout_s=300)
    oracle = Oracle(
        measuring(tiny, tmp_path / "envs", "github-src", **{"github-src": provider}), CASE
    )
    found, rows = searched(oracle, tiny, hub.source())

    assert found.state == "culprit_found", (found.reason, rows)
    culprit = found.answer["culprit"]
    assert (culprit["kind"], culprit["commit"]) == ("commit", tiny.commits[SLOW]), rows
    assert culprit["link"] == f"{WEB}/commit/{tiny.commits[SLOW]}"
    assert found.answer["commits"] == COMMITS - 1
    assert found.costs.builds <= math.ceil(math.log2(COMMITS - 1)) + 2, rows
    broken = [r for r in rows if r.outcome == "build_failed"]
    assert [r.label[:12] for r in broken] == [tiny.commits[BROKEN][:12]], rows
    assert "this commit does not build" in broken[0].reason
    # Each build cloned the repository from the server, over git's HTTP.
    clones = [path for path, _, _ in hub.requests if path.endswith(f"{REPO}.git/info/refs")]
    assert len(clones) == found.costs.builds


@pytest.fixture
def worker(
    database: Database, tiny: Tiny, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Database:
    """The task runs here, on the test database, its source the GitHub repository."""
    monkeypatch.setattr(task, "worker_database", lambda: database)
    suite = CommandSuite.model_validate(tiny.command_suite())
    monkeypatch.setattr(task.settings, "COMMAND_SUITES", {COMMAND: suite})
    monkeypatch.setattr(task.settings, "LOCALIZE_SOURCES", {"tinypkg": f"github:{OWNER}/{REPO}"})
    monkeypatch.setattr(task.settings, "ENV_CACHE", str(tmp_path / "envs"))
    return database


@pytest.fixture
def client(database: Database, tiny: Tiny) -> Iterator[TestClient]:
    config = Settings(
        DATABASE_URL=database.url,
        TOKEN_PEPPER=PEPPER,
        BROKER_URL=None,
        COMMAND_SUITES={COMMAND: tiny.command_suite()},
        LOCALIZE_SUITES={SUITE: COMMAND},
    )
    application = create_app(config)
    with TestClient(application) as test_client:
        yield test_client
    application.state.database.dispose()


@pytest.mark.parametrize(
    ("token", "script", "reason"),
    [
        ("ghp_wrong", None, "GitHub refused the token (401 Bad credentials)"),
        (
            TOKEN,
            _on(f"/repos/{OWNER}/{REPO}", _reply(200, {"full_name": 5, "clone_url": "x"})),
            "the repository: GitHub's answer is not as its API documents (full_name: Input "
            "should be a valid string)",
        ),
    ],
    ids=["401", "hostile"],
)
def test_the_worker_fails_the_localization_with_what_github_said(
    token: str,
    script: Scripted | None,
    reason: str,
    client: TestClient,
    worker: Database,
    tiny: Tiny,
    hub: FakeGitHub,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(task.settings, "LOCALIZE_GITHUB_API_URL", hub.api)
    monkeypatch.setattr(task.settings, "LOCALIZE_GITHUB_TOKEN", SecretStr(token))
    if script is not None:
        hub.script = script
    made = asked(client, worker, nightlies(client, worker, tiny, 0, COMMITS - 1))
    outcome = task.localize.apply(kwargs={"localization_id": made["id"], "machine": MACHINE})
    assert outcome.get() == "failed"
    found = client.get(f"/api/v1/localizations/{made['id']}").json()
    assert found["state"] == "failed"
    assert found["reason"].startswith(f"the search failed: GitHubError: github:{OWNER}/{REPO}: ")
    assert reason in found["reason"]
    assert token not in json.dumps(found)
    assert found["builds"] == 0  # before any build: the pre-flight's spec needs the commits
