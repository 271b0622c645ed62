"""Slack receivers: the Block Kit message, escaped, as a local server receives it."""

import json
from collections.abc import Iterator
from typing import Any

import pytest

from app.notifications.message import Message, finding_line
from app.notifications.message import test_message as sample_message
from app.notifications.receivers import SendContext
from app.notifications.receivers.slack import blocks, send
from tests.notifications.test_outbound import LocalReceiver, answer, local_receiver

SUBSCRIPTION = {"id": 1, "name": "torchbench owners", "owner": "perf", "revision": 3}
CONTEXT = SendContext(public_url="https://bw.example", receiver_allow="127.0.0.1", timeout_s=2)
CRAFTED = "<!channel> & <https://evil|x>"


def notice(**changes: Any) -> Message:
    message = sample_message("notice-7", SUBSCRIPTION, "https://bw.example", "2026-12-01T14:00:00Z")
    return Message(message.id, {**message.payload, **changes})


def findings(count: int, model: str = "resnet50") -> list[dict[str, Any]]:
    base = dict(notice().findings[0])
    return [{**base, "id": i, "model": f"{model}-{i}"} for i in range(count)]


def mrkdwn_texts(body: dict[str, Any]) -> list[str]:
    texts = [body["text"]]
    for block in body["blocks"]:
        if block["type"] == "section":
            texts.append(block["text"]["text"])
        if block["type"] == "context":
            texts += [element["text"] for element in block["elements"]]
    return texts


def slack(url: str) -> dict[str, Any]:
    return {"kind": "slack", "url": url, "disabled": False, "disabled_reason": ""}


@pytest.fixture
def receiver() -> Iterator[LocalReceiver]:
    with local_receiver() as serving:
        yield serving


def test_slack_receives_the_block_kit_message(receiver: LocalReceiver) -> None:
    message = notice(findings=findings(1, model=CRAFTED), url="https://bw.example/alerts/7")
    outcome = send(slack(receiver.url("/services/T0/B0/x")), message, CONTEXT)
    assert (outcome.ok, outcome.status) == (True, 200)
    [seen] = receiver.seen
    assert seen.headers["content-type"] == "application/json"
    body = json.loads(seen.body)
    assert body == blocks(message)
    header, section, actions = body["blocks"]
    assert header == {"type": "header", "text": {"type": "plain_text", "text": message.headline}}
    assert body["text"] == "Test notice for subscription 'torchbench owners': nothing regressed"
    assert section["text"]["verbatim"] is True
    assert section["text"]["text"] == (
        "• regression +34.5% latency_ms test/&lt;!channel&gt; &amp; &lt;https://evil|x&gt;"
        "-0/inductor/amp/inference (10 -&gt; 13.45), confirmed (p=0.001)"
    )
    assert actions["elements"][0]["url"] == "https://bw.example/alerts/7"
    assert actions["elements"][0]["type"] == "button"


def test_crafted_names_cannot_mention_or_link() -> None:
    crafted = findings(3, model=CRAFTED)
    group = {
        "headline": f"group {CRAFTED}",
        "url": "https://bw.example/alerts/8",
        "findings": crafted,
    }
    for message in (
        notice(findings=crafted, headline=f"headline {CRAFTED}"),
        notice(findings=[], groups=[group], event="digest", headline=CRAFTED),
    ):
        for text in mrkdwn_texts(blocks(message)):
            assert "<" not in text
            assert ">" not in text
            assert "&lt;!channel&gt;" in text or text.startswith("and ")


def test_a_link_that_is_not_http_gets_no_button() -> None:
    body = blocks(notice(url="javascript:alert(1)"))
    assert [block["type"] for block in body["blocks"]] == ["header", "section"]
    assert "javascript" not in json.dumps(body)


def test_at_most_ten_findings_and_the_rest_counted() -> None:
    message = notice(findings=findings(20), findings_omitted=25)
    body = blocks(message)
    section = next(b for b in body["blocks"] if b["type"] == "section")
    lines = section["text"]["text"].split("\n")
    assert lines == [f"• {finding_line(f).replace('>', '&gt;')}" for f in message.findings[:10]]
    context = next(b for b in body["blocks"] if b["type"] == "context")
    assert context["elements"][0]["text"] == "and 35 more"


def test_long_text_stays_within_slacks_limits() -> None:
    long_model = "m&" * 500
    message = notice(headline="h" * 400, findings=findings(10, model=long_model))
    body = blocks(message)
    header = body["blocks"][0]["text"]["text"]
    assert len(header) == 150
    assert header.endswith("…")
    section = next(b for b in body["blocks"] if b["type"] == "section")
    assert len(section["text"]["text"]) <= 3000
    lines = section["text"]["text"].split("\n")
    assert len(lines) == 10
    assert all(line.endswith("&amp;…") or line.endswith("m…") for line in lines)


def test_a_digest_lists_its_groups() -> None:
    groups = [
        {"headline": f"group {i}", "url": "https://bw.example/alerts/1", "findings": findings(4)}
        for i in range(4)
    ]
    body = blocks(notice(event="digest", findings=[], groups=groups))
    section = next(b for b in body["blocks"] if b["type"] == "section")
    lines = section["text"]["text"].split("\n")
    assert [line for line in lines if line.startswith("*")] == [f"*group {i}*" for i in range(4)]
    assert sum(line.startswith("• ") for line in lines) == 10
    context = next(b for b in body["blocks"] if b["type"] == "context")
    assert context["elements"][0]["text"] == "and 6 more"


@pytest.mark.parametrize(
    ("status", "reply", "retry", "disable"),
    [(404, b"no_service", False, False), (410, b"channel_is_archived", False, True)],
)
def test_slack_errors(
    receiver: LocalReceiver, status: int, reply: bytes, retry: bool, disable: bool
) -> None:
    receiver.routes["/hook"] = answer(status, reply)
    outcome = send(slack(receiver.url()), notice(), CONTEXT)
    assert (outcome.ok, outcome.retry, outcome.disable) == (False, retry, disable)
    assert outcome.error.startswith(f"HTTP {status}")
    if status == 404:
        assert outcome.error == "HTTP 404: no_service"
