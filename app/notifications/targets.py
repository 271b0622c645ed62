"""Receivers as delivery knows them: a stable key, a display target, their credentials.

A receiver is identified across a subscription's revisions by its kind and where it sends
(``receiver_key``), so that a changed secret or label is used by the next attempt of a
delivery planned before the change. The log shows a receiver by ``receiver_target``, which
leaves out what is secret in it (a Slack webhook's path is its credential).
"""

import base64
import hashlib
import secrets
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from app.notifications.schemas import SECRET_PREFIX

SECRET_BYTES = 24  # of a signing secret made for a webhook
FEED_TOKEN_BYTES = 24  # of a feed's token (32 characters in base64url)


def where(receiver: Mapping[str, Any]) -> str:
    """What a receiver sends to, in full (credentials included): the basis of its key."""
    kind = receiver["kind"]
    if kind == "email":
        return ",".join(sorted(receiver["to"]))
    if kind == "github_issue":
        return str(receiver["repository"])
    if kind == "feed":
        return str(receiver.get("token") or "")
    return str(receiver["url"])


def receiver_key(receiver: Mapping[str, Any]) -> str:
    """``kind:`` and a hash of where it sends: the same receiver in every revision."""
    digest = hashlib.sha256(where(receiver).encode()).hexdigest()[:32]
    return f"{receiver['kind']}:{digest}"


def receiver_target(receiver: Mapping[str, Any]) -> str:
    """Where it sends, for people: a URL as scheme, host and port only; at most 300 chars."""
    kind = receiver["kind"]
    if kind in ("webhook", "slack", "apprise"):
        parts = urlsplit(str(receiver["url"]))
        port = f":{parts.port}" if parts.port else ""
        shown = f"{parts.scheme}://{parts.hostname or ''}{port}/…"
    elif kind == "feed":
        shown = "Atom feed"
    else:
        shown = where(receiver)
    return shown[:300]


def new_secret() -> str:
    """A signing secret in the Standard Webhooks form (``whsec_`` and base64)."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def with_credentials(
    receivers: Sequence[Mapping[str, Any]], before: Sequence[Mapping[str, Any]] = ()
) -> list[dict[str, Any]]:
    """``receivers`` with the secrets and tokens left out filled in.

    A webhook without ``secrets`` keeps those of the receiver with the same URL in ``before``
    (the subscription as it was), or gets a new one; a feed without ``token`` likewise.
    """
    kept: dict[tuple[str, str], Mapping[str, Any]] = {}
    for old in before:
        if old["kind"] == "webhook":
            kept[("webhook", old["url"])] = old
        elif old["kind"] == "feed":
            kept[("feed", "")] = old
    filled = []
    for receiver in receivers:
        one = dict(receiver)
        if one["kind"] == "webhook" and not one.get("secrets"):
            webhook = kept.get(("webhook", one["url"])) or {}
            one["secrets"] = list(webhook.get("secrets") or [new_secret()])
        elif one["kind"] == "feed" and not one.get("token"):
            feed = kept.get(("feed", "")) or {}
            one["token"] = feed.get("token") or secrets.token_urlsafe(FEED_TOKEN_BYTES)
        filled.append(one)
    return filled


def token_hash(token: str) -> str:
    """What ``subscription.feed_token`` stores of a feed's token: its SHA-256, in hex.

    Not the API tokens' peppered HMAC: the migration that hashed the stored tokens has no
    pepper, and a feed token is 24 random bytes, which a plain SHA-256 keeps one-way.
    """
    return hashlib.sha256(token.encode()).hexdigest()


def feed_token(receivers: Sequence[Mapping[str, Any]]) -> str | None:
    """The token of the feed among ``receivers`` (a subscription has at most one feed)."""
    return next((str(r["token"]) for r in receivers if r["kind"] == "feed"), None)
