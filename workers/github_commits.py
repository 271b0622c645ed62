"""A component's commits read from GitHub's REST API: a ``github:OWNER/REPO`` commit source.

``BENCHWATCH_LOCALIZE_SOURCES`` names, per component, a local clone (``workers.clones.Clone``)
or a GitHub repository (``GitHubRepository``, here); ``commit_source`` makes a value the one it
names. The repository is read at ``BENCHWATCH_LOCALIZE_GITHUB_API_URL`` with
``BENCHWATCH_LOCALIZE_GITHUB_TOKEN`` (a secret: sent as the ``Authorization`` header of API
requests to that address only, never written to a log, a reason or an answer):

- ``commit_of``: each name ``workers.clones.revisions`` gives a recorded version (the value
  itself, a sha or a tag; the commit a ``+g1a2b3c4`` version names) asked of
  ``GET /repos/{owner}/{repo}/commits/{ref}`` as ``application/vnd.github.sha``, which answers
  the full sha alone;
- ``between``: ``GET /repos/{owner}/{repo}/compare/{good}...{bad}``, paged (with a paging
  parameter GitHub lists every commit, earliest first, pages linked by ``Link: rel="next"``;
  without one it lists the newest 250 only), at most ``MAX_COMMITS`` commits; a longer range
  is not bisected, saying so, as a range that is no range;
- ``describe``: the commit's title, author, date, ``html_url`` and its author's GitHub login
  (``author_login``, where GitHub knows the account) from the comparison's pages;
- ``path``: the repository's ``clone_url``, which a probe's spec gives its provider as the
  component's ``source``, beside the commit.

Every request is bounded: ``TIMEOUT_S`` to connect and between reads, ``DEADLINE_S`` in all,
``MAX_RESPONSE_BYTES`` of answer, ``MAX_REDIRECTS``. What GitHub refuses (401, 403, 404, its
rate limits) or answers in a shape its API does not document (a wrong type, a sha that is
none) is a ``GitHubError`` saying which, which fails the localization with that reason.
"""

import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar
from urllib.parse import quote, urlsplit

import httpx
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from app.core.config import Settings, github_source, settings
from app.core.urls import is_http_url
from workers.clones import Clone, CommitSource, revisions

MAX_COMMITS = 1024  # a range's commits read; a longer one is not bisected (about 10 builds)
PER_PAGE = 100  # the most a page of a comparison lists
MAX_RESPONSE_BYTES = 32 * 1024 * 1024  # the first page of a comparison lists 300 files' patches
TIMEOUT_S = 30.0
DEADLINE_S = 120.0
MAX_REDIRECTS = 3  # a renamed repository answers 301 to its new name
MAX_TEXT = 200  # characters of a title, an author, a message GitHub gave
SHA = re.compile(r"^[0-9a-f]{40}$")
LOGIN = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$")  # a GitHub account's name
API_VERSION = "2022-11-28"
NO_TOKEN = SecretStr("")  # GitHub's anonymous rate limit (60 requests an hour per address)
M = TypeVar("M", bound=BaseModel)


class GitHubError(Exception):
    """GitHub refused a request or answered what its API does not: the search cannot go on."""


@dataclass(frozen=True)
class _Reply:
    status: int
    headers: httpx.Headers
    body: bytes
    next_url: str | None  # Link: rel="next"


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)


class _Repository(_Answer):
    full_name: str
    clone_url: str


class _Person(_Answer):
    name: str = ""
    email: str = ""
    date: str = ""


class _GitCommit(_Answer):
    message: str
    author: _Person | None = None
    committer: _Person | None = None


class _Account(_Answer):
    login: str


class _Commit(_Answer):
    sha: str = Field(pattern=SHA.pattern)
    html_url: str | None = None
    commit: _GitCommit
    author: _Account | None = None  # the GitHub account of the commit's author, where known


class _Sha(_Answer):
    sha: str = Field(pattern=SHA.pattern)


class _Comparison(_Answer):
    status: Literal["ahead", "behind", "identical", "diverged"]
    total_commits: int = Field(ge=0)
    merge_base_commit: _Sha
    commits: list[_Commit]


class GitHubRepository:
    """A repository on GitHub as a commit source: its API read with a token, every read bounded."""

    def __init__(
        self,
        owner: str,
        repo: str,
        *,
        api_url: str = "https://api.github.com",
        token: SecretStr = NO_TOKEN,
        max_commits: int = MAX_COMMITS,
        per_page: int = PER_PAGE,
        max_bytes: int = MAX_RESPONSE_BYTES,
        timeout_s: float = TIMEOUT_S,
        deadline_s: float = DEADLINE_S,
    ) -> None:
        """``owner/repo`` at ``api_url`` (GitHub's or an Enterprise server's ``/api/v3``)."""
        self.owner, self.repo = owner, repo
        self.name = f"github:{owner}/{repo}"
        self.api_url = api_url.rstrip("/")
        self._token = token
        self.max_commits, self.per_page, self.max_bytes = max_commits, per_page, max_bytes
        self.timeout_s, self.deadline_s = timeout_s, deadline_s
        self._repository: _Repository | None = None
        self._described: dict[str, dict[str, str]] = {}

    def __repr__(self) -> str:
        return f"GitHubRepository({self.name!r}, api_url={self.api_url!r})"

    @property
    def path(self) -> str:
        """The repository's clone URL: what an operator's provider clones to build a commit."""
        return self.repository().clone_url

    def repository(self) -> _Repository:
        """The repository as GitHub describes it (read once): it exists and the token reads it."""
        if self._repository is None:
            found = self._json(self._repo_url(), _Repository, "the repository")
            if not is_http_url(found.clone_url):
                raise GitHubError(f"{self.name}: its clone_url {found.clone_url!r} is no URL")
            self._repository = found
        return self._repository

    def commit_of(self, recorded: str) -> str | None:
        """The full commit a recorded version (a sha, a tag, ``+g<sha>``) names, or None."""
        self.repository()  # a repository GitHub does not show is an error, not "no commit"
        for name in revisions(recorded):
            reply = self._get(
                f"{self._repo_url()}/commits/{quote(name, safe='')}",
                accept="application/vnd.github.sha",
            )
            if reply.status in (404, 422):  # no such commit, or a short sha that names several
                continue
            self._refused(reply, f"the commit {name!r}")
            sha = reply.body.decode("ascii", "replace").strip()
            if not SHA.match(sha):
                raise GitHubError(f"{self.name}: the commit {name!r} came back as {sha[:60]!r}")
            return sha
        return None

    def between(self, good: str, bad: str) -> list[str] | str:
        """The commits from ``good`` to ``bad``, both ends included, oldest first; or why not."""
        basehead = f"{quote(good, safe='')}...{quote(bad, safe='')}"
        url: str | None = f"{self._repo_url()}/compare/{basehead}"
        params: dict[str, str | int] | None = {"per_page": self.per_page, "page": 1}
        commits: list[str] = []
        pages = 0
        while url is not None:
            pages += 1
            if pages > self.max_commits // self.per_page + 2:
                return f"{self.name}: the comparison of {good}...{bad} did not end in {pages} pages"
            reply = self._get(url, params=params)
            self._refused(reply, f"the comparison {good[:12]}...{bad[:12]}")
            page = _parsed(reply.body, _Comparison, f"{self.name}: the comparison {good}...{bad}")
            if page.status != "ahead" or page.merge_base_commit.sha != good:
                return f"{bad} does not descend from {good} in {self.name} ({page.status})"
            if page.total_commits > self.max_commits:
                return (
                    f"{page.total_commits} commits from {good[:12]} to {bad[:12]} in {self.name}: "
                    f"more than the {self.max_commits} a bisection reads; not bisected"
                )
            for commit in page.commits:
                commits.append(commit.sha)
                self._described[commit.sha] = _facts(commit)
            if len(commits) > page.total_commits:
                return f"{self.name}: the comparison lists more commits than its total"
            url, params = self._next(reply), None
        if not commits or commits[-1] != bad or len(set(commits)) != len(commits):
            return (
                f"{bad} does not descend from {good} in {self.name} (its commits do not end there)"
            )
        return [good, *commits]

    def describe(self, commit: str) -> dict[str, str]:
        """A commit's title, author, date; its ``html_url`` (http(s) only) and author's login."""
        if commit not in self._described:
            url = f"{self._repo_url()}/commits/{quote(commit, safe='')}"
            found = self._json(url, _Commit, f"the commit {commit[:12]}")
            self._described[commit] = _facts(found)
        return dict(self._described[commit])

    def _repo_url(self) -> str:
        return f"{self.api_url}/repos/{quote(self.owner, safe='')}/{quote(self.repo, safe='')}"

    def _json(self, url: str, model: type[M], what: str) -> M:
        reply = self._get(url)
        self._refused(reply, what)
        return _parsed(reply.body, model, f"{self.name}: {what}")

    def _next(self, reply: _Reply) -> str | None:
        """The next page's URL (``Link: rel="next"``), which must be on the API's own address."""
        url = reply.next_url
        if url is not None and _origin(url) != _origin(self.api_url):
            raise GitHubError(f"{self.name}: the next page is at another address: {url[:200]!r}")
        return url

    def _get(
        self,
        url: str,
        *,
        params: Mapping[str, str | int] | None = None,
        accept: str = "application/vnd.github+json",
    ) -> _Reply:
        """One GET's answer, bounded in time and size."""
        headers = {
            "Accept": accept,
            "X-GitHub-Api-Version": API_VERSION,
            "User-Agent": "benchwatch",
        }
        if token := self._token.get_secret_value():
            headers["Authorization"] = f"Bearer {token}"
        start = time.monotonic()
        try:
            with (
                httpx.Client(
                    timeout=self.timeout_s, follow_redirects=True, max_redirects=MAX_REDIRECTS
                ) as client,
                client.stream("GET", url, params=params, headers=headers) as response,
            ):
                declared = response.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > self.max_bytes:
                    raise GitHubError(self._too_big(url))
                body = bytearray()
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > self.max_bytes:
                        raise GitHubError(self._too_big(url))
                    if time.monotonic() - start > self.deadline_s:
                        raise GitHubError(
                            f"{self.name}: {_shown(url)} took over {self.deadline_s:g} s"
                        )
                following = response.links.get("next", {}).get("url")
                return _Reply(response.status_code, response.headers, bytes(body), following)
        except httpx.HTTPError as error:
            raise GitHubError(
                f"{self.name}: {_shown(url)} could not be read: {type(error).__name__}"
            ) from None

    def _too_big(self, url: str) -> str:
        return f"{self.name}: {_shown(url)} answered more than {self.max_bytes} bytes"

    def _refused(self, reply: _Reply, what: str) -> None:
        """Raise what GitHub said, where it did not answer 200."""
        status, headers = reply.status, reply.headers
        if status == 200:
            return
        said = _message(reply.body)
        if status == 401:
            given = "refused the token" if self._token.get_secret_value() else "asks for a token"
            raise GitHubError(
                f"{self.name}: GitHub {given} (401 {said}): set BENCHWATCH_LOCALIZE_GITHUB_TOKEN "
                "to a token that can read the repository"
            )
        if status in (403, 429) and (limit := self._limited(headers, said)):
            raise GitHubError(f"{self.name}: {limit}")
        if status == 403:
            raise GitHubError(f"{self.name}: GitHub forbids reading {what} (403 {said})")
        if status == 404:
            raise GitHubError(
                f"{self.name}: GitHub does not show {what} (404 {said}), "
                "or the token cannot read it"
            )
        raise GitHubError(f"{self.name}: GitHub answered {status} for {what} ({said})")

    def _limited(self, headers: httpx.Headers, said: str) -> str | None:
        """What a rate limit said (``retry-after``, ``x-ratelimit-*``), where one was hit."""
        if (wait := headers.get("retry-after", "")).isdigit():
            return f"GitHub's rate limit ({said}): try again in {wait} s"
        if headers.get("x-ratelimit-remaining") == "0":
            reset = headers.get("x-ratelimit-reset", "")
            when = (
                datetime.fromtimestamp(int(reset), UTC).isoformat()
                if reset.isdigit() and len(reset) <= 12
                else "a time GitHub did not say"
            )
            token = "" if self._token.get_secret_value() else " (a token has a higher limit)"
            return f"GitHub's rate limit is spent ({said}): it resets at {when}{token}"
        return None


def commit_source(value: str | CommitSource, config: Settings = settings) -> CommitSource:
    """A ``BENCHWATCH_LOCALIZE_SOURCES`` value as the source it names (a source stays itself).

    ``github:OWNER/REPO``: the repository at the configured API with the configured token;
    anything else (an absolute path, as the settings check): a local clone.
    """
    if not isinstance(value, str):
        return value
    if named := github_source(value):
        return GitHubRepository(
            *named, api_url=config.LOCALIZE_GITHUB_API_URL, token=config.LOCALIZE_GITHUB_TOKEN
        )
    return Clone(value)


def _parsed(body: bytes, model: type[M], what: str) -> M:
    """``body`` as ``model``, or a GitHubError naming the first field that is not as documented."""
    try:
        return model.model_validate_json(body)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the answer"
        raise GitHubError(
            f"{what}: GitHub's answer is not as its API documents ({where}: {first['msg']})"
        ) from None


def _facts(commit: _Commit) -> dict[str, str]:
    """A commit as ``CommitSource.describe`` gives it (a clone's: %s, %an <%ae>, %cI)."""
    git = commit.commit
    title = " ".join(git.message.split("\n\n", 1)[0].split())  # git's %s: the first paragraph
    author = git.author or _Person()
    named = f"{author.name} <{author.email}>" if author.email else author.name
    found = {
        "commit": commit.sha,
        "title": title[:MAX_TEXT],
        "author": named[:MAX_TEXT],
        "date": (git.committer or _Person()).date[:40],
    }
    if commit.html_url and is_http_url(commit.html_url):
        found["link"] = commit.html_url
    if commit.author is not None and LOGIN.match(commit.author.login):
        found["author_login"] = commit.author.login  # whom a notice may mention (opted in)
    return found


def _message(body: bytes) -> str:
    """GitHub's ``message`` in an error's body, printable and short; else the body's start."""
    try:
        said: Any = json.loads(body).get("message")
    except (ValueError, AttributeError):
        said = body[:MAX_TEXT].decode("utf-8", "replace")
    text = "".join(c if c.isprintable() else " " for c in str(said or "no message"))
    return text[:MAX_TEXT].strip()


def _origin(url: str) -> tuple[str, str | None, int | None]:
    parts = urlsplit(url)
    return parts.scheme, parts.hostname, parts.port


def _shown(url: str) -> str:
    """A request's URL in a reason: no query (paging), at most 200 characters."""
    return url.split("?", 1)[0][:MAX_TEXT]
