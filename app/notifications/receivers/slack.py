"""Slack receivers: an incoming webhook sent a Block Kit message.

The message: a header (the headline), the worst findings as one mrkdwn section, "and N more"
when some are left out, and a button to the alert group's page. A localized notice's section
starts with what the localization found, and a second button opens the culprit commit (an
http(s) link only); the author's GitHub login, where the subscription asked, is text. Text
that came from uploads (model, suite, config names, failure reasons, a commit's title and
author) is escaped as Slack asks (``&``, ``<``, ``>``, and every ``@`` broken:
``app.core.escape.slack``), and mrkdwn is sent ``verbatim``, so a model named ``<!channel>``,
``@here`` or ``<https://evil|x>`` is shown, not obeyed.
"""

import json
from collections.abc import Mapping
from typing import Any, Literal

from app.core.escape import slack as escape
from app.core.escape import unmention
from app.core.urls import is_http_url
from app.notifications.message import Message, finding_line, lines_of, mention_of
from app.notifications.outbound import post_for_outcome
from app.notifications.receivers import Outcome, SendContext
from app.notifications.receivers.base import ReceiverBase, ReceiverKind, Url

HEADER_CHARS = 150  # Slack's limit on a header block's text
SECTION_CHARS = 3000  # Slack's limit on a section's text
LINE_CHARS = 280  # one finding (after escaping), so that ten fit a section
MAX_LISTED = 10  # findings shown; the rest are counted
MAX_GROUPS = 10  # groups of a digest shown


class SlackReceiver(ReceiverBase):
    """A Slack incoming webhook (Block Kit message)."""

    kind: Literal["slack"]
    url: Url


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _cut_escaped(text: str, limit: int) -> str:
    """``text`` escaped, cut to ``limit`` characters without splitting an entity."""
    escaped = escape(text)
    if len(escaped) <= limit:
        return escaped
    kept, size = [], 0
    for char in text:
        piece = escape(char)
        if size + len(piece) > limit - 1:
            break
        kept.append(piece)
        size += len(piece)
    return "".join(kept) + "…"


def _mrkdwn(text: str) -> dict[str, Any]:
    return {"type": "mrkdwn", "text": text, "verbatim": True}


class _Lines:
    """A section's text, line by line, held to Slack's limit."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.size = 0

    def add(self, line: str) -> bool:
        """Append ``line`` if it fits; whether it did."""
        if self.size + len(line) + 1 > SECTION_CHARS:
            return False
        self.lines.append(line)
        self.size += len(line) + 1
        return True


def _finding_lines(message: Message) -> tuple[list[str], int]:
    """The section's lines (a digest's group headlines in bold), and the findings left out."""
    text = _Lines()
    listed = omitted = 0
    for index, section in enumerate(message.payload.get("groups") or [message.payload]):
        findings = list(section.get("findings") or [])
        omitted += int(section.get("findings_omitted") or 0)
        if section is not message.payload:  # a group of a digest
            title = f"*{_cut_escaped(str(section.get('headline', '')), LINE_CHARS)}*"
            if index >= MAX_GROUPS or not text.add(title):
                omitted += len(findings)
                continue
        if isinstance(told := section.get("localization"), Mapping):
            for line in _localization_lines(told):
                text.add(line)
        for finding in findings:
            line = f"• {_cut_escaped(finding_line(finding), LINE_CHARS)}"
            if listed < MAX_LISTED and text.add(line):
                listed += 1
            else:
                omitted += 1
    return text.lines, omitted


def _localization_lines(told: Mapping[str, Any]) -> list[str]:
    """A localization's lines, escaped; its author's GitHub login as text (no Slack ping)."""
    lines = [f"*{line.label}:* {_cut_escaped(line.text, LINE_CHARS)}" for line in lines_of(told)]
    if mention := mention_of(told):
        lines.append(f"cc {escape(mention)}")
    return lines


def _buttons(message: Message) -> list[dict[str, Any]]:
    """A button to the notice's page, and to a localized notice's culprit commit (http(s))."""
    links = [("Open in benchwatch", message.url)]
    told = message.payload.get("localization")
    culprit = told.get("culprit") if isinstance(told, Mapping) else None
    if isinstance(culprit, Mapping) and isinstance(culprit.get("link"), str):
        links.append(("Open the commit", culprit["link"]))
    return [
        {"type": "button", "text": {"type": "plain_text", "text": text}, "url": url}
        for text, url in links
        if is_http_url(url)
    ]


def blocks(message: Message) -> dict[str, Any]:
    """The webhook's JSON body: fallback ``text`` and the Block Kit ``blocks``."""
    headline = message.headline.strip() or "benchwatch notice"
    body: list[dict[str, Any]] = [
        # plain_text draws no link or entity, but a client may still read a typed @channel.
        {
            "type": "header",
            "text": {"type": "plain_text", "text": _cut(unmention(headline), HEADER_CHARS)},
        }
    ]
    lines, omitted = _finding_lines(message)
    if lines:
        body.append({"type": "section", "text": _mrkdwn("\n".join(lines))})
    if omitted:
        body.append({"type": "context", "elements": [_mrkdwn(f"and {omitted} more")]})
    if buttons := _buttons(message):
        body.append({"type": "actions", "elements": buttons})
    return {"text": _cut_escaped(headline, SECTION_CHARS), "blocks": body}


def send(receiver: Mapping[str, Any], message: Message, context: SendContext) -> Outcome:
    """POST the notice to the Slack incoming webhook (Slack answers 200 "ok")."""
    content = json.dumps(blocks(message), separators=(",", ":")).encode()
    headers = {"content-type": "application/json", "user-agent": "benchwatch"}
    return post_for_outcome(str(receiver["url"]), content=content, headers=headers, context=context)


# An incoming webhook's path is its credential: reads and the log show its host only, and
# its URL passes the SSRF guard (the defaults).
KIND = ReceiverKind("slack", SlackReceiver, send)
