"""Issue 26 point 5: a crafted upload sent to every receiver, as each one's server gets it.

A model named ``@channel`` and a failure reason holding a Markdown link, a Slack link and a
Slack mention reach each receiver as text: no live mention, no live link, for its format.
"""

import json
import re
from typing import Any

from markdown_it import MarkdownIt

from app.notifications import message as notices
from app.notifications.message import Message
from app.notifications.receivers import apprise_receiver, email, github_issue, slack, webhook
from tests.notifications.test_apprise import Mattermost, mattermost  # noqa: F401 (fixture)
from tests.notifications.test_apprise import context as apprise_context
from tests.notifications.test_email import Recorder, parse, plain_context, plain_port, recorder  # noqa: F401
from tests.notifications.test_github_issue import GROUP, FakeGitHub, github  # noqa: F401
from tests.notifications.test_github_issue import RECEIVER as GITHUB_RECEIVER
from tests.notifications.test_github_issue import context as github_context
from tests.notifications.test_outbound import LocalReceiver
from tests.notifications.test_slack import CONTEXT as HTTP_CONTEXT
from tests.notifications.test_slack import receiver  # noqa: F401 (fixture)

SUBSCRIPTION = {"id": 1, "name": "perf team", "owner": "perf@example.com", "revision": 3}
MODEL = "@channel"
REASON = "[click](https://evil.example) <https://evil.example|click> <!here> @everyone"
SECRET = "whsec_" + "A" * 44
# A mention a reader would act on: @ right before the name (a zero-width space breaks it).
LIVE_MENTION = re.compile(r"@(channel|here|everyone)|<!(channel|here|everyone)")


def crafted() -> Message:
    """A failure notice of model ``@channel`` whose reason is a phishing link, on @here's
    machine, between commits that are links too."""
    message = notices.test_message(
        "notice-26", SUBSCRIPTION, "https://bw.example", "2026-12-01T14:00:00Z"
    )
    finding = {
        **dict(message.findings[0]),
        "kind": "failure",
        "model": MODEL,
        "reason": REASON,
        "url": "https://bw.example/runs/12",
    }
    group = {
        **GROUP,
        "machine": "@here",
        "channel": "[main](https://evil.example)",
        "first_bad_run": {**GROUP["first_bad_run"], "commit": "<https://evil.example|def456>"},
    }
    headline = f"1 failure on @here (nightly): {MODEL} {REASON}"
    payload = {**message.payload, "headline": headline, "findings": [finding], "group": group}
    return Message(message.id, payload)


def rendered_links(markdown: str) -> list[str]:
    """The links a CommonMark reader (raw HTML on, as GitHub and Mattermost) draws."""
    page = MarkdownIt("commonmark").enable("table").render(markdown)
    return re.findall(r'href="([^"]*)"', page) + re.findall(r"<a\b[^>]*>", page)


def assert_no_evil_link(links: list[str]) -> None:
    assert not [link for link in links if "evil" in link]


def test_slack(receiver: LocalReceiver) -> None:  # noqa: F811
    hook = {"kind": "slack", "url": receiver.url("/services/T/B/x")}
    outcome = slack.send(hook, crafted(), HTTP_CONTEXT)
    assert outcome.ok, outcome.error
    body = json.loads(receiver.seen[0].body)
    texts = [body["text"], body["blocks"][0]["text"]["text"]]
    texts += [b["text"]["text"] for b in body["blocks"] if b["type"] == "section"]
    assert "click" in texts[2]  # the reason is there, as text
    for text in texts:
        assert not LIVE_MENTION.search(text), text
    # The fallback text and the section: no control character left, so no <url|text> link.
    # The header is plain_text, which Slack draws as typed (no link, no entity).
    for text in texts[::2]:
        assert "<" not in text
        assert ">" not in text


def test_apprise_title_and_body(mattermost: Mattermost) -> None:  # noqa: F811
    url = f"mmost://127.0.0.1:{mattermost.port}/tok3n"
    outcome = apprise_receiver.send({"kind": "apprise", "url": url}, crafted(), apprise_context())
    assert outcome.ok, outcome.error
    ((_, payload),) = mattermost.posts
    text = payload["text"]  # Apprise's Mattermost: the title, then the body, as Markdown
    assert "click" in text
    assert not LIVE_MENTION.search(text), text
    assert_no_evil_link(rendered_links(text))
    assert "](https://evil" not in text


def test_github_issue_title_and_body(github: FakeGitHub) -> None:  # noqa: F811
    assert github_issue.send(GITHUB_RECEIVER, crafted(), github_context(github)).ok
    fields = github.seen[0].fields
    assert not LIVE_MENTION.search(fields["title"]), fields["title"]
    assert "click" in fields["body"]
    page = MarkdownIt("commonmark").enable("table").render(fields["body"])
    assert not LIVE_MENTION.search(page)
    assert_no_evil_link(rendered_links(fields["body"]))


def test_email_html_part_draws_no_link(recorder: Recorder, plain_port: int) -> None:  # noqa: F811
    assert email.send(
        {"kind": "email", "to": ["perf@example.com"]}, crafted(), plain_context(plain_port)
    ).ok
    mail = parse(recorder.received[0])
    html_part, plain = mail.get_body(("html",)), mail.get_body(("plain",))
    assert html_part is not None
    assert plain is not None
    html = html_part.get_content()
    assert "evil" in html  # shown, as text
    assert not [link for link in re.findall(r"<a\b[^>]*>", html) if "evil" in link]
    assert "<https" not in html
    assert "<!here>" not in html
    # Plain text draws nothing: the reason as it was typed.
    assert REASON in plain.get_content()


def test_webhook_sends_the_strings_as_json_data(receiver: LocalReceiver) -> None:  # noqa: F811
    """JSON has no markup: the receiver gets the strings exactly, to escape for its own sink."""
    message = crafted()
    hook: dict[str, Any] = {"kind": "webhook", "url": receiver.url(), "secrets": [SECRET]}
    assert webhook.send(hook, message, HTTP_CONTEXT).ok
    sent = json.loads(receiver.seen[0].body)
    assert sent["findings"][0]["model"] == MODEL
    assert sent["findings"][0]["reason"] == REASON
    assert sent == json.loads(json.dumps(message.payload))
