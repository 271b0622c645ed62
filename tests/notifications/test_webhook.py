"""Webhook receivers: the JSON a local server receives, verified by standardwebhooks."""

import base64
import hashlib
import hmac
import json
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from app.notifications.message import Message
from app.notifications.message import test_message as sample_message
from app.notifications.receivers import SendContext
from app.notifications.receivers.webhook import github_signature, send, sign
from tests.notifications.test_outbound import LocalReceiver, answer, local_receiver

SUBSCRIPTION = {"id": 1, "name": "torchbench owners", "owner": "perf", "revision": 3}
CONTEXT = SendContext(public_url="https://bw.example", receiver_allow="127.0.0.1", timeout_s=2)


def new_secret() -> str:
    return "whsec_" + base64.b64encode(os.urandom(32)).decode()


def notice() -> Message:
    return sample_message("notice-42", SUBSCRIPTION, "https://bw.example", "2026-12-01T14:00:00Z")


def hook(url: str, *secrets: str) -> dict[str, Any]:
    return {"kind": "webhook", "url": url, "secrets": list(secrets), "disabled": False}


@pytest.fixture
def receiver() -> Iterator[LocalReceiver]:
    with local_receiver() as serving:
        yield serving


def test_the_notice_arrives_signed(receiver: LocalReceiver) -> None:
    secret = new_secret()
    message = notice()
    outcome = send(hook(receiver.url(), secret), message, CONTEXT)
    assert (outcome.ok, outcome.status, outcome.error) == (True, 200, "")
    [seen] = receiver.seen
    assert seen.method == "POST"
    assert seen.headers["content-type"] == "application/json"
    assert seen.headers["user-agent"] == "benchwatch"
    assert seen.headers["webhook-id"] == "notice-42"
    assert abs(int(seen.headers["webhook-timestamp"]) - time.time()) < 5
    assert seen.body == json.dumps(message.payload, separators=(",", ":")).encode()
    assert Webhook(secret).verify(seen.body, seen.headers) == message.payload
    with pytest.raises(WebhookVerificationError):
        Webhook(new_secret()).verify(seen.body, seen.headers)


def test_a_tampered_notice_fails_verification(receiver: LocalReceiver) -> None:
    secret = new_secret()
    send(hook(receiver.url(), secret), notice(), CONTEXT)
    [seen] = receiver.seen
    tampered = seen.body.replace(b"nothing regressed", b"nothing regressed!")
    assert tampered != seen.body
    with pytest.raises(WebhookVerificationError, match="No matching signature"):
        Webhook(secret).verify(tampered, seen.headers)
    replayed = {**seen.headers, "webhook-id": "notice-43"}
    with pytest.raises(WebhookVerificationError, match="No matching signature"):
        Webhook(secret).verify(seen.body, replayed)


def test_every_secret_signs_so_rotation_keeps_verifying(receiver: LocalReceiver) -> None:
    new, old = new_secret(), new_secret()
    send(hook(receiver.url(), new, old), notice(), CONTEXT)
    [seen] = receiver.seen
    assert len(seen.headers["webhook-signature"].split(" ")) == 2
    Webhook(new).verify(seen.body, seen.headers)
    Webhook(old).verify(seen.body, seen.headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(new_secret()).verify(seen.body, seen.headers)


def test_github_signature_is_keyed_by_the_newest_secrets_text(receiver: LocalReceiver) -> None:
    new, old = new_secret(), new_secret()
    send(hook(receiver.url(), new, old), notice(), CONTEXT)
    [seen] = receiver.seen
    header = seen.headers["x-hub-signature-256"]
    expected = "sha256=" + hmac.new(new.encode(), seen.body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(header, expected)
    tampered = "sha256=" + hmac.new(new.encode(), seen.body + b" ", hashlib.sha256).hexdigest()
    assert header != tampered
    assert github_signature(new, seen.body) == header


def test_sign_matches_the_reference_implementation() -> None:
    secrets = [new_secret(), new_secret()]
    body = b'{"version":1,"text":"caf\\u00e9"}'
    timestamp = 1_796_000_000
    at = datetime.fromtimestamp(timestamp, tz=UTC)
    reference = [Webhook(s).sign("notice-1", at, body.decode()) for s in secrets]
    assert sign(secrets, "notice-1", timestamp, body) == " ".join(reference)


@pytest.mark.parametrize(
    ("status", "ok", "retry", "disable"),
    [(204, True, False, False), (410, False, False, True), (500, False, True, False)],
)
def test_the_receivers_answer_decides(
    receiver: LocalReceiver, status: int, ok: bool, retry: bool, disable: bool
) -> None:
    receiver.routes["/hook"] = answer(status, b"")
    outcome = send(hook(receiver.url(), new_secret()), notice(), CONTEXT)
    assert (outcome.ok, outcome.status, outcome.retry, outcome.disable) == (
        ok,
        status,
        retry,
        disable,
    )


def test_without_a_secret_nothing_is_sent(receiver: LocalReceiver) -> None:
    outcome = send(hook(receiver.url()), notice(), CONTEXT)
    assert (outcome.ok, outcome.retry) == (False, False)
    assert "no signing secret" in outcome.error
    assert receiver.seen == []


def test_a_loopback_webhook_is_refused_unless_allowed(receiver: LocalReceiver) -> None:
    outcome = send(hook(receiver.url(), new_secret()), notice(), SendContext("https://bw.example"))
    assert (outcome.ok, outcome.retry, outcome.status) == (False, False, None)
    assert "BENCHWATCH_RECEIVER_ALLOW" in outcome.error
    assert receiver.seen == []
