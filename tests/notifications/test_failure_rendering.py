"""A failing case renders in every receiver's wording, its reason escaped."""

from typing import Any

from app.notifications.message import Message, finding_line, text_body
from app.notifications.message import test_message as sample_message
from app.notifications.receivers import SendContext, email, github_issue, slack

REASON = "<script>alert(1)</script> @channel *bold*"


def failing() -> Message:
    sample = sample_message(
        "notice-9",
        {"id": 1, "name": "s", "owner": "", "revision": 1},
        "https://bw.example",
        "2026-12-01T00:00:00Z",
    )
    failure: dict[str, Any] = {
        "id": 9,
        "kind": "failure",
        "url": "https://bw.example/runs/12",
        "suite": "torchbench",
        "model": "t5",
        "category": "",
        "config": "inductor",
        "precision": "amp",
        "mode": "training",
        "metric": "latency",
        "failure": "failed",
        "reason": REASON,
        "flaky": True,
        "last_passing_run": {
            "id": 11,
            "url": "https://bw.example/runs/11",
            "started_at": None,
            "commit": "",
        },
        "first_failing_run": {
            "id": 12,
            "url": "https://bw.example/runs/12",
            "started_at": None,
            "commit": "",
        },
        "passing_again_run_id": None,
        "status": "new",
    }
    payload = {
        **sample.payload,
        "event": "opened",
        "findings": [failure, *sample.payload["findings"]],
    }
    return Message("notice-9", payload)


def test_a_failure_has_its_own_line() -> None:
    message = failing()
    line = finding_line(message.findings[0])
    assert line == f"failure (flaky) torchbench/t5/inductor/amp/training: {REASON}"
    assert line in text_body(message)


def test_every_receiver_renders_it_escaped() -> None:
    message = failing()
    blocks = str(slack.blocks(message))
    assert "&lt;script&gt;" in blocks
    assert "<script>" not in blocks
    context = SendContext(public_url="https://bw.example", smtp_from="bw@bw.example")
    mail = email.build({"kind": "email", "to": ["a@bw.example"]}, message, context)
    html = mail.get_body(("html",))
    assert html is not None
    assert "&lt;script&gt;" in html.get_content()
    assert "<script>" not in html.get_content()
    markdown = github_issue.issue_body(message)
    assert "<script>" not in markdown
    assert "t5" in markdown
