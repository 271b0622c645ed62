"""GitHub issue receivers: one issue per alert group, opened, then commented on and closed.

The first notice of a group opens an issue (``POST /repos/{owner}/{repo}/issues``); its
number comes back in the outcome's receipt, and the delivery job hands that receipt to the
next notice of the group (``SendContext.previous_receipt``), which comments on the issue
instead; a ``resolved`` notice also closes it. Requests go through ``outbound.request`` (the
SSRF guard, no redirects, the time limit), to ``github_api_url`` (GitHub Enterprise:
``https://ghe.example/api/v3``) with the operator's token.

Issue text is Markdown that GitHub renders with HTML allowed; payload values (model names,
hints, environment versions, a culprit commit's title and author) come from uploads and
clones, so each is escaped (``escape_markdown``) and only http(s) links are made. The one
live mention is a localized notice's ``@login`` of the culprit's author, where the
subscription asked for it and the culprit carries a GitHub login (``message.mention_of``
checks it is one). A localized notice comments on the group's issue as any later notice does
(one gone or never opened: it opens one).
"""

import json
import re
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Annotated, Any, Literal

from pydantic import Field

from app.core.bounds import NulFree
from app.core.escape import markdown as escape_markdown
from app.core.escape import markdown_link, unmention
from app.notifications import guard, outbound
from app.notifications.message import Message, finding_line, lines_of, mention_of
from app.notifications.receivers import Outcome, SendContext
from app.notifications.receivers.base import (
    ReceiverBase,
    ReceiverKind,
    as_stored,
    nothing_to_check,
)

NO_TOKEN = "no GitHub token configured (BENCHWATCH_GITHUB_TOKEN)"
API_VERSION = "2022-11-28"
TITLE_CHARS = 256  # GitHub's limit on an issue title
MAX_ENV_ROWS = 12  # of the environment diff shown in a new issue
RESPONSE_BYTES = 1024 * 1024  # GitHub echoes the issue back; its number must be readable
_REPOSITORY = re.compile(r"([A-Za-z0-9_.-]{1,100})/([A-Za-z0-9_.-]{1,100})")
_MARKER_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
Repository = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$")]
Label = Annotated[str, NulFree, Field(min_length=1, max_length=50)]


class GitHubIssueReceiver(ReceiverBase):
    """One GitHub issue per alert group in ``repository``, opened and then updated."""

    kind: Literal["github_issue"]
    repository: Repository
    labels: Annotated[list[Label], Field(max_length=10)] = Field(default_factory=list)


def _finding_items(section: Mapping[str, Any]) -> list[str]:
    lines = []
    for finding in section.get("findings") or []:
        lines.append(f"- {markdown_link(finding.get('url'), finding_line(finding))}")
        lines += [f"  {escape_markdown(h)}  " for h in finding.get("hints") or [] if h]
    omitted = section.get("findings_omitted")
    if isinstance(omitted, int) and omitted > 0:
        lines.append(f"- and {omitted} more")
    return lines


def _localization_items(told: Mapping[str, Any], mention: bool) -> list[str]:
    """What a localization found, a line each (escaped, links only http(s)).

    ``mention``: the author's GitHub login as a live ``@login`` (the issue's own receiver);
    else as text, escaped, that pings nobody (other Markdown receivers).
    """
    lines = [
        f"**{escape_markdown(line.label)}:** {markdown_link(line.link, line.text)}  "
        for line in lines_of(told)
    ]
    if login := mention_of(told):  # a checked login: letters, digits and inner hyphens
        lines.append(f"cc {login if mention else escape_markdown(login)}")
    return [*lines, ""]


def markdown_body(message: Message, mention: bool = False) -> str:
    """The notice as Markdown: a link to it, then its findings (a digest's under each group).

    The headline is left out: receivers show it as the title. A localized notice's section
    starts with what its localization found (``mention``: see ``_localization_items``).
    """
    lines = [markdown_link(message.url, "Open in benchwatch"), ""]
    sections = message.payload.get("groups") or [message.payload]
    for section in sections:
        if section is not message.payload:
            lines += [f"**{markdown_link(section.get('url'), str(section.get('headline')))}**", ""]
        if isinstance(told := section.get("localization"), Mapping):
            lines += _localization_items(told, mention)
        lines += [*_finding_items(section), ""]
    return "\n".join(lines).rstrip() + "\n"


def _run_line(label: str, run: object) -> list[str]:
    if not isinstance(run, Mapping):
        return []
    text = f"run {run.get('id')}" + (f" ({run['commit']})" if run.get("commit") else "")
    return [f"**{label}:** {markdown_link(run.get('url'), text)}  "]


def _group_lines(group: object) -> list[str]:
    """The alert group's facts: where, the runs around the step, what changed in between."""
    if not isinstance(group, Mapping):
        return []
    lines = [
        f"**Machine:** {escape_markdown(group.get('machine', ''))}  ",
        f"**Channel:** {escape_markdown(group.get('channel', ''))}  ",
        *_run_line("Last good", group.get("last_good_run")),
        *_run_line("First bad", group.get("first_bad_run")),
        "",
    ]
    diff = group.get("environment_diff")
    if isinstance(diff, Mapping) and diff:
        lines += ["| Environment | Before | After |", "| --- | --- | --- |"]
        for name, change in list(diff.items())[:MAX_ENV_ROWS]:
            before, after = (
                change if isinstance(change, list | tuple) and len(change) == 2 else ("", "")
            )
            cells = (escape_markdown(v) for v in (name, before, after))
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return lines


def _marker(message: Message) -> str:
    """An HTML comment naming the notice: invisible, and searchable in the repository."""
    return f"<!-- benchwatch {_MARKER_UNSAFE.sub('-', message.id)} -->"


def issue_body(message: Message) -> str:
    """A new issue's body: the headline, the group's facts, the findings."""
    lines = [escape_markdown(message.headline), "", *_group_lines(message.payload.get("group"))]
    body = markdown_body(message, mention=True)
    return "\n".join(lines) + "\n" + body + "\n" + _marker(message) + "\n"


def comment_body(message: Message) -> str:
    """A comment on the group's issue for a later notice: what happened, and the findings."""
    headline = f"**{escape_markdown(message.headline)}**\n\n"
    return headline + markdown_body(message, mention=True) + "\n" + _marker(message) + "\n"


def _headers(context: SendContext) -> dict[str, str]:
    return {
        "authorization": f"Bearer {context.github_token}",
        "accept": "application/vnd.github+json",
        "x-github-api-version": API_VERSION,
        "user-agent": "benchwatch",
        "content-type": "application/json",
    }


def _judge(response: outbound.Response) -> Outcome:
    """``outbound.outcome_of``, with GitHub's rate limits (a 403 too) retried."""
    outcome = outbound.outcome_of(response)
    headers = response.headers
    limited = "retry-after" in headers or headers.get("x-ratelimit-remaining") == "0"
    if response.status in (403, 429) and limited:
        wait = headers.get("retry-after") or f"until {headers.get('x-ratelimit-reset', '?')}"
        error = f"GitHub rate limit (HTTP {response.status}), wait {wait}"
        return Outcome(
            ok=False,
            status=response.status,
            latency_ms=response.latency_ms,
            error=error[:300],
            retry=True,
            retry_after_s=_rate_limit_wait(headers),
        )
    return outcome


def _rate_limit_wait(headers: Mapping[str, str]) -> float | None:
    """Seconds until GitHub takes requests again: ``retry-after``, else the limit's reset."""
    if (seconds := outbound.retry_after(headers.get("retry-after"))) is not None:
        return seconds
    reset = headers.get("x-ratelimit-reset", "")
    return max(float(reset) - time.time(), 0.0) if reset.isdigit() else None


class _Api:
    """The calls of one delivery, with the operator's settings."""

    def __init__(self, context: SendContext, allow: guard.AllowList, repository: str) -> None:
        self.context = context
        self.allow = allow
        self.base = f"{context.github_api_url.rstrip('/')}/repos/{repository}/issues"

    def call(self, method: str, path: str, fields: Mapping[str, Any]) -> outbound.Response:
        return outbound.request(
            method,
            self.base + path,
            content=json.dumps(fields).encode(),
            headers=_headers(self.context),
            allow=self.allow,
            timeout_s=self.context.timeout_s,
            max_response_bytes=max(self.context.max_response_bytes, RESPONSE_BYTES),
        )

    def open_issue(self, receiver: Mapping[str, Any], message: Message) -> Outcome:
        fields = {
            # A title is drawn as text (no link, no tag), but its @mentions may be read.
            "title": unmention(" ".join(message.headline.split()))[:TITLE_CHARS],
            "body": issue_body(message),
            "labels": [str(label) for label in receiver.get("labels") or []],
        }
        response = self.call("POST", "", fields)
        outcome = _judge(response)
        if not outcome.ok:
            return outcome
        try:
            issue = json.loads(response.body)
            receipt = {"issue_number": int(issue["number"]), "issue_url": str(issue["html_url"])}
        except (ValueError, KeyError, TypeError):
            # Opened, but which one is unknown: the next notice opens another.
            error = "GitHub opened the issue but its answer names no issue number"
            return Outcome(
                ok=True, status=outcome.status, latency_ms=outcome.latency_ms, error=error
            )
        return Outcome(
            ok=True, status=outcome.status, latency_ms=outcome.latency_ms, receipt=receipt
        )

    def update_issue(self, number: int, message: Message, receipt: Mapping[str, Any]) -> Outcome:
        """Comment on issue ``number``; close it first when the group is resolved.

        A 410 here is the issue's, not the receiver's: it never switches the receiver off.
        """
        if message.event == "resolved":
            # Closing first: it is idempotent, so a retry after a failed comment repeats
            # only the close, not the comment.
            closing = {"state": "closed", "state_reason": "completed"}
            closed = _judge(self.call("PATCH", f"/{number}", closing))
            if not closed.ok:
                return replace(closed, disable=False)
        outcome = _judge(self.call("POST", f"/{number}/comments", {"body": comment_body(message)}))
        return replace(outcome, disable=False, receipt=dict(receipt) if outcome.ok else {})


def _repository(receiver: Mapping[str, Any]) -> str:
    """``owner/name``, checked again: neither part may be a dot segment (``..``)."""
    match = _REPOSITORY.fullmatch(str(receiver.get("repository", "")))
    if match is None or {match[1], match[2]} & {".", ".."}:
        raise ValueError(f"not a GitHub repository (owner/name): {receiver.get('repository')!r}")
    return f"{match[1]}/{match[2]}"


def _issue_number(receipt: Mapping[str, Any] | None) -> int | None:
    number = (receipt or {}).get("issue_number")
    return (
        number if isinstance(number, int) and not isinstance(number, bool) and number > 0 else None
    )


def send(receiver: Mapping[str, Any], message: Message, context: SendContext) -> Outcome:
    """Open the group's issue, or comment on it (and close it when resolved).

    A comment on an issue that is gone (404, 410: deleted, or no longer visible to the token)
    opens a new one, unless the group is resolved; a resolved group that never had an issue
    opens none. A 410 on opening an issue (issues switched off in the repository) switches
    the receiver off.
    """
    started = time.monotonic()
    if not context.github_token:
        return Outcome(ok=False, error=NO_TOKEN)
    try:
        repository = _repository(receiver)
    except ValueError as exc:
        return Outcome(ok=False, error=str(exc))
    try:
        allow = guard.AllowList.parse(context.receiver_allow)
    except ValueError as exc:  # the operator's to fix; the notice waits for it
        return Outcome(ok=False, error=str(exc), retry=True)
    api = _Api(context, allow, repository)
    number = _issue_number(context.previous_receipt)
    try:
        if number is not None:
            outcome = api.update_issue(number, message, context.previous_receipt or {})
            if outcome.ok or outcome.status not in (404, 410) or message.event == "resolved":
                return outcome
        elif message.event == "resolved":
            return Outcome(ok=True, error="nothing to close: no issue was opened for this group")
        return api.open_issue(receiver, message)
    except (guard.Refused, guard.DeliveryError) as exc:
        return outbound.failed(exc, started)


def _where(receiver: Mapping[str, Any]) -> str:
    return str(receiver["repository"])


# It sends to the operator's GitHub API (checked at each request): shown as it is.
KIND = ReceiverKind(
    "github_issue",
    GitHubIssueReceiver,
    send,
    where=_where,
    target=_where,
    masked=as_stored,
    check=nothing_to_check,
)
