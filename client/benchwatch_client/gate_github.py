"""The pull-request gate's posts to GitHub: one check run and one sticky pull-request comment.

:func:`benchwatch_client.gate_report.run_gate` has the verdicts judged and rendered; this module
only finds where to say it (the job's environment: repository, pull request, head commit, token)
and sends it through GitHub's REST API. It is apart from the rendering because it is the
networked, token-holding half: it knows nothing of verdicts (it is handed a :class:`Posting`,
already rendered), and imports nothing of the gate's, so the imports go one way
(the gate's modules import this one). For that reason :func:`plain`, which both halves apply to
hostile text, lives here.

Posting is best effort: a refusal, a timeout, an unreachable API or an unusable environment
becomes a :class:`Posted` saying so, and never changes the gate's exit status.
The token is sent to the API's own host only (no redirects, no foreign pagination links) and
appears in no message, even should GitHub echo it.
"""

import json
import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from benchwatch_client.text import is_http_url

API_VERSION = "2022-11-28"
COMMENT_PAGES = 10  # of 100 comments each: a pull request with more gets a new sticky comment
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_REPOSITORY = re.compile(r"[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}")
_PULL_REF = re.compile(r"refs/pull/([0-9]{1,9})/(?:merge|head)")
_KEY_UNSAFE = re.compile(r"[^A-Za-z0-9._/-]+")


def plain(value: object, limit: int = 200) -> str:
    """``value`` as one printable line of at most ``limit`` characters.

    Control and format characters (ANSI escapes, bidi overrides, zero-width joiners) become
    spaces: a crafted model name can neither repaint a terminal nor reorder a comment's text.
    """
    if value is None:
        return ""
    text = "".join(" " if unicodedata.category(c)[0] == "C" else c for c in str(value))
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True)
class CheckRun:
    """A completed check run's content, as the gate rendered it."""

    conclusion: str  # failure, neutral or success
    title: str
    summary: str  # Markdown, within GitHub's limit
    text: str  # Markdown, within GitHub's limit
    details_url: str = ""  # the verdicts page; none: not sent
    external_id: str = ""  # the run's id; none: not sent


@dataclass(frozen=True)
class Posting:
    """What the gate asks to post; ``None`` for what it does not ask for."""

    check_run: CheckRun | None = None
    comment: Callable[[str], str] | None = None  # the comment's body, given its hidden marker
    key: str = ""  # names the check run and the comment; default: $GITHUB_WORKFLOW/channel
    channel: str = ""  # the upload's channel
    timeout_s: float = 10.0  # per GitHub request


@dataclass(frozen=True)
class GitHubContext:
    """Where to post: the API, the repository, the pull request and its head commit."""

    api_url: str
    repository: str
    token: str = field(repr=False)
    pull_number: int | None
    head_sha: str


def _event(env: Mapping[str, str]) -> Mapping[str, Any]:
    path = env.get("GITHUB_EVENT_PATH", "")
    try:
        event = json.loads(Path(path).read_text(encoding="utf-8")) if path else {}
    except (OSError, ValueError):
        return {}
    pull = event.get("pull_request") if isinstance(event, dict) else None
    return pull if isinstance(pull, dict) else {}


def github_context(env: Mapping[str, str]) -> GitHubContext | str:
    """What the job's environment says about where to post, or why it cannot be said.

    The head commit is the event's ``pull_request.head.sha``: for ``pull_request`` events
    ``GITHUB_SHA`` is the merge commit GitHub made, and a check run there shows on no pull
    request. ``GITHUB_SHA`` serves for other events (a push to a branch).
    """
    token = env.get("GITHUB_TOKEN", "")
    if not token:
        return "no GITHUB_TOKEN in the environment (pass it to the step: env: GITHUB_TOKEN)"
    api_url = env.get("GITHUB_API_URL") or "https://api.github.com"
    if not is_http_url(api_url):
        return "GITHUB_API_URL is not an http(s) URL"
    repository = env.get("GITHUB_REPOSITORY", "")
    if not _REPOSITORY.fullmatch(repository) or {".", ".."} & set(repository.split("/")):
        return "GITHUB_REPOSITORY is not owner/name"
    pull = _event(env)
    number = pull.get("number")
    if not (isinstance(number, int) and not isinstance(number, bool) and number > 0):
        ref = _PULL_REF.fullmatch(env.get("GITHUB_REF", ""))
        number = int(ref[1]) if ref else None
    head = pull.get("head")
    sha = head.get("sha") if isinstance(head, dict) else None
    if not isinstance(sha, str) or not _SHA.fullmatch(sha):
        sha = env.get("GITHUB_SHA", "")
    return GitHubContext(api_url.rstrip("/"), repository, token, number, sha)


@dataclass(frozen=True)
class Posted:
    """What became of one post: the check run or the comment."""

    what: str
    ok: bool
    message: str


class _Refused(Exception):
    """GitHub said no, or could not be reached; the message says which and what to do."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def _json(response: httpx.Response) -> Any:
    """The answer's JSON, or None: a 2xx that is not JSON still counts as done."""
    try:
        return response.json()
    except ValueError:
        return None


_HINTS = {
    401: "the token was refused (wrong or expired)",
    403: (
        "the token may not do this: give the job `permissions: {checks: write, "
        "pull-requests: write}`; a pull request from a fork gets a read-only GITHUB_TOKEN, and "
        "only a GitHub App's token (GITHUB_TOKEN is one) may create check runs"
    ),
    404: "the repository or pull request is not there, or the token cannot see it",
    422: "GitHub refused the request's content",
}


class _GitHub:
    """The calls of one gate, on one client with the token and GitHub's documented headers."""

    def __init__(self, context: GitHubContext, timeout_s: float) -> None:
        self.context = context
        self.base = f"{context.api_url}/repos/{context.repository}"
        self.client = httpx.Client(
            timeout=httpx.Timeout(timeout_s),
            follow_redirects=False,  # a redirect would carry the request elsewhere
            headers={
                "Authorization": f"Bearer {context.token}",
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": API_VERSION,
                "User-Agent": "benchwatch",
            },
        )

    def call(self, method: str, url: str, body: Mapping[str, Any] | None = None) -> httpx.Response:
        try:
            response = self.client.request(method, url, json=body)
        except httpx.TimeoutException:
            raise _Refused("GitHub did not answer in time") from None
        except httpx.HTTPError as exc:
            raise _Refused(f"GitHub is unreachable ({type(exc).__name__})") from None
        if response.is_success:
            return response
        raise _Refused(_refusal(response), response.status_code)

    def same_origin(self, url: str) -> bool:
        """Whether ``url`` is on the API's host: the token goes nowhere else."""
        mine, theirs = urlsplit(self.context.api_url), urlsplit(url)
        return (mine.scheme, mine.netloc) == (theirs.scheme, theirs.netloc)


def _refusal(response: httpx.Response) -> str:
    status, headers = response.status_code, response.headers
    answer = _json(response)
    said = plain(answer.get("message"), 200) if isinstance(answer, dict) else ""
    if status in (403, 429) and (
        "retry-after" in headers or headers.get("x-ratelimit-remaining") == "0"
    ):
        wait = headers.get("retry-after")
        reset = headers.get("x-ratelimit-reset", "")
        when = (
            f"retry after {plain(wait, 20)} s"
            if wait
            else f"the limit resets at {plain(reset, 20)} (epoch s)"
        )
        return f"GitHub rate limit (HTTP {status}): {when}"
    hint = _HINTS.get(status, "")
    return f"HTTP {status}" + (f" {said}" if said else "") + (f": {hint}" if hint else "")


def _post_check_run(github: _GitHub, check: CheckRun, name: str) -> Posted:
    """Create a completed check run on the pull request's head commit."""
    if not _SHA.fullmatch(github.context.head_sha):
        return Posted("check run", False, "no head commit (GITHUB_SHA, the event's head.sha)")
    fields: dict[str, Any] = {
        "name": name,
        "head_sha": github.context.head_sha,
        "status": "completed",
        "conclusion": check.conclusion,
        "completed_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "output": {"title": check.title, "summary": check.summary, "text": check.text},
    }
    if check.details_url:
        fields["details_url"] = check.details_url
    if check.external_id:
        fields["external_id"] = check.external_id
    answer = _json(github.call("POST", f"{github.base}/check-runs", fields))
    url = answer.get("html_url") if isinstance(answer, dict) else None
    return Posted("check run", True, f"{check.conclusion}: {plain(url or name)}")


def comment_marker(key: str) -> str:
    """The hidden line that finds this gate's comment again; ``key`` keeps gates apart."""
    return f"<!-- benchwatch-gate {_KEY_UNSAFE.sub('-', key)[:100] or 'default'} -->"


def _find_comment(github: _GitHub, number: int, marker: str, author: str) -> int | None:
    """The id of the first comment carrying ``marker`` by ``author`` (else by any bot)."""
    url: str | None = f"{github.base}/issues/{number}/comments?per_page=100"
    for _ in range(COMMENT_PAGES):
        if url is None or not github.same_origin(url):
            return None
        response = github.call("GET", url)
        page = _json(response)
        for comment in page if isinstance(page, list) else []:
            user = comment.get("user") if isinstance(comment, dict) else None
            user = user if isinstance(user, dict) else {}
            # A person could paste the marker; only our own comment is rewritten.
            ours = user.get("login") == author if author else user.get("type") == "Bot"
            if (
                ours
                and marker in str(comment.get("body", ""))
                and isinstance(comment.get("id"), int)
            ):
                return int(comment["id"])
        url = response.links.get("next", {}).get("url")
    return None


def _post_comment(github: _GitHub, render: Callable[[str], str], key: str, author: str) -> Posted:
    """Update this gate's comment on the pull request in place, or add it."""
    number = github.context.pull_number
    if number is None:
        return Posted("comment", False, "not a pull request (GITHUB_EVENT_PATH, GITHUB_REF)")
    marker = comment_marker(key)
    body = {"body": render(marker)}
    found, verb = _find_comment(github, number, marker, author), "updated"
    if found is not None:
        try:
            answer = _json(github.call("PATCH", f"{github.base}/issues/comments/{found}", body))
        except _Refused as exc:
            if exc.status != 404:
                raise
            found = None  # deleted since it was listed: add it again
    if found is None:
        answer = _json(github.call("POST", f"{github.base}/issues/{number}/comments", body))
        verb = "added"
    url = answer.get("html_url") if isinstance(answer, dict) else None
    return Posted("comment", True, f"{verb}: {plain(url or number)}")


def post_to_github(posting: Posting, env: Mapping[str, str]) -> list[Posted]:
    """Post what ``posting`` holds; each failure is reported and changes nothing else."""
    wanted = [
        what
        for what, content in (("check run", posting.check_run), ("comment", posting.comment))
        if content is not None
    ]
    if not wanted:
        return []
    context = github_context(env)
    if isinstance(context, str):
        return [Posted(what, False, context) for what in wanted]
    workflow = env.get("GITHUB_WORKFLOW", "")
    key = posting.key or "/".join(k for k in (workflow, posting.channel) if k)
    github = _GitHub(context, posting.timeout_s)
    results = []
    with github.client:
        for what in wanted:
            try:
                if what == "check run" and posting.check_run is not None:
                    name = f"benchwatch ({plain(key, 80)})" if key else "benchwatch"
                    results.append(_post_check_run(github, posting.check_run, name))
                elif posting.comment is not None:
                    author = env.get("BENCHWATCH_COMMENT_AUTHOR", "")
                    results.append(_post_comment(github, posting.comment, key, author))
            except _Refused as exc:
                results.append(Posted(what, False, str(exc)))
    # The token appears in no message, even should GitHub echo it.
    return [Posted(p.what, p.ok, p.message.replace(context.token, "***")) for p in results]
