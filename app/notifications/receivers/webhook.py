"""Webhook receivers: the notice's payload POSTed as JSON, signed two ways.

- Standard Webhooks (https://www.standardwebhooks.com): ``webhook-id`` (the notice id, the
  same on every attempt), ``webhook-timestamp`` (Unix seconds) and ``webhook-signature``:
  ``v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>")>`` for each of the receiver's
  secrets, space-separated, where the key is the base64 after ``whsec_``. Every secret
  signs, so a receiver that moves to a new secret still verifies with the old one meanwhile.
- GitHub's ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256(secret, body)>``, keyed by the
  newest secret's whole text (``whsec_...`` as UTF-8), for receivers built for GitHub.
"""

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import Field

from app.notifications.message import Message
from app.notifications.outbound import post_for_outcome
from app.notifications.receivers import Outcome, SendContext
from app.notifications.receivers.base import ReceiverBase, ReceiverKind, Url

SECRET_PREFIX = "whsec_"
_B64 = "[A-Za-z0-9+/]"
# 24 to 64 bytes in padded base64: 8 to 21 groups of 4 characters, then 1 or 2 bytes more
# (a group ending == or =) where that stays within 64.
SIGNING_SECRET = (
    f"^{SECRET_PREFIX}(?:(?:{_B64}{{4}}){{8,20}}(?:{_B64}{{2}}==|{_B64}{{3}}=)?"
    f"|(?:{_B64}{{4}}){{21}}(?:{_B64}{{2}}==)?)$"
)
Secret = Annotated[
    str,
    Field(
        max_length=100,
        pattern=SIGNING_SECRET,
        description=f"{SECRET_PREFIX} and 24 to 64 bytes in base64",
    ),
]


class WebhookReceiver(ReceiverBase):
    """A URL that is sent each notice as signed JSON (Standard Webhooks, and GitHub's header).

    ``secrets``: the signing secrets, newest first; every one signs each notice, so a
    receiver can move to a new secret while the old one still verifies. Left out, the
    receiver keeps the secrets it had (same URL), or gets a new one.
    """

    kind: Literal["webhook"]
    url: Url
    secrets: Annotated[list[Secret], Field(min_length=1, max_length=3)] | None = None


def body_of(message: Message) -> bytes:
    """The request body: the payload as compact JSON, UTF-8."""
    return json.dumps(dict(message.payload), separators=(",", ":"), sort_keys=False).encode()


def sign(secrets: Sequence[str], msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` header: ``v1,<base64 signature>`` per secret, space-separated.

    Raises:
        ValueError: a secret is not ``whsec_`` and base64.
    """
    signed = f"{msg_id}.{timestamp}.".encode() + body
    signatures = []
    for secret in secrets:
        key = base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
        digest = hmac.new(key, signed, hashlib.sha256).digest()
        signatures.append(f"v1,{base64.b64encode(digest).decode()}")
    return " ".join(signatures)


def github_signature(secret: str, body: bytes) -> str:
    """The ``X-Hub-Signature-256`` header: ``sha256=<hex>``, keyed by the secret's whole text."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def signed_headers(
    secrets: Sequence[str], msg_id: str, timestamp: int, body: bytes
) -> dict[str, str]:
    """Every header of a webhook request for ``body`` (``secrets``: newest first)."""
    return {
        "content-type": "application/json",
        "user-agent": "benchwatch",
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign(secrets, msg_id, timestamp, body),
        "X-Hub-Signature-256": github_signature(secrets[0], body),
    }


def send(receiver: Mapping[str, Any], message: Message, context: SendContext) -> Outcome:
    """POST the notice to the webhook's URL, signed with each of its secrets."""
    secrets = list(receiver.get("secrets") or [])
    if not secrets:
        return Outcome(ok=False, error="the webhook has no signing secret: give it one")
    body = body_of(message)
    try:
        headers = signed_headers(secrets, message.id, int(time.time()), body)
    except ValueError:
        return Outcome(ok=False, error="a signing secret of the webhook is not whsec_ and base64")
    return post_for_outcome(str(receiver["url"]), content=body, headers=headers, context=context)


# Its URL shown as its host and checked by the SSRF guard (the defaults); its signing
# secrets are masked as every kind's are (targets.masked).
KIND = ReceiverKind("webhook", WebhookReceiver, send)
