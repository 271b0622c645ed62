"""Receivers as delivery knows them: a stable key, a display target, their credentials.

A receiver is identified across a subscription's revisions by its kind and where it sends
(``receiver_key``), so that a changed secret or label is used by the next attempt of a
delivery planned before the change. The log shows a receiver by ``receiver_target``, which
leaves out what is secret in it (a Slack webhook's path is its credential). What a receiver
sends to, and how it is shown, is its kind's to say (``receivers.registry``).
"""

import base64
import hashlib
import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from app.core.errors import InvalidInput
from app.notifications.receivers.base import MASK, TARGET_CHARS
from app.notifications.receivers.registry import BY_NAME
from app.notifications.receivers.webhook import SECRET_PREFIX

SECRET_BYTES = 24  # of a signing secret made for a webhook
FEED_TOKEN_BYTES = 24  # of a feed's token (32 characters in base64url)


def where(receiver: Mapping[str, Any]) -> str:
    """What a receiver sends to, in full (credentials included): the basis of its key."""
    return BY_NAME[receiver["kind"]].where(receiver)


def receiver_key(receiver: Mapping[str, Any]) -> str:
    """``kind:`` and a hash of where it sends: the same receiver in every revision."""
    digest = hashlib.sha256(where(receiver).encode()).hexdigest()[:32]
    return f"{receiver['kind']}:{digest}"


def receiver_target(receiver: Mapping[str, Any]) -> str:
    """Where it sends, for people: a URL as scheme, host and port only; at most 300 chars."""
    return BY_NAME[receiver["kind"]].target(receiver)[:TARGET_CHARS]


def _masked_secret(secret: str) -> str:
    """A signing secret as reads show it: its prefix and last 4 characters, to tell them apart."""
    return f"{SECRET_PREFIX}{MASK}{secret[-4:]}"


def masked(receiver: Mapping[str, Any]) -> dict[str, Any]:
    """A receiver as every read answers it: its credentials masked, the rest as stored.

    Its kind masks its own fields (``ReceiverKind.masked``): a webhook's or Slack URL keeps
    its scheme, host and port (its path and query may be the credential); an Apprise URL
    only its scheme (some schemes carry the token as the host). Of every kind, signing
    secrets keep their last 4 characters and a token is left out. Only the answer that makes
    a secret or token shows it, once.
    """
    own = BY_NAME[receiver["kind"]].masked(receiver)
    shown = {k: v for k, v in own.items() if k != "token"}
    if receiver.get("secrets"):
        shown["secrets"] = [_masked_secret(str(s)) for s in receiver["secrets"]]
    return shown


def answered(
    receivers: Sequence[Mapping[str, Any]],
    before: Sequence[Mapping[str, Any]] | None = None,
    made_token: str | None = None,
) -> list[dict[str, Any]]:
    """Receivers as an answer gives them: masked, but for the credentials new since ``before``.

    ``before`` None: a read, every credential masked. Given (the receivers before a create,
    ``[]``, or a change), a signing secret that was not there is shown in full, and so is
    ``made_token``, the feed token the change made (``Subscription.made_feed_token``: the
    row keeps its hash only): the answer that makes it is the one place it can be learnt.
    """
    if before is None:
        return [masked(r) for r in receivers]
    old_secrets = {str(s) for r in before for s in r.get("secrets") or []}
    shown = []
    for receiver in receivers:
        one = masked(receiver)
        new = [str(s) for s in receiver.get("secrets") or [] if str(s) not in old_secrets]
        if new:
            one["secrets"] = [
                str(s) if str(s) in new else m
                for s, m in zip(receiver["secrets"], one["secrets"], strict=True)
            ]
        if receiver["kind"] == "feed" and made_token:
            one["token"] = made_token
        shown.append(one)
    return shown


def new_secret() -> str:
    """A signing secret in the Standard Webhooks form (``whsec_`` and base64)."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def with_credentials(
    receivers: Sequence[Mapping[str, Any]], before: Sequence[Mapping[str, Any]] = ()
) -> list[dict[str, Any]]:
    """``receivers`` with the secrets and tokens left out filled in.

    A webhook without ``secrets`` keeps those of the receiver with the same URL in ``before``
    (the subscription as it was), or gets a new one. A feed without ``token`` gets a new one
    only if ``before`` had no feed: the one it had keeps its token, of which the subscription
    stores only the hash (``stored``).
    """
    kept: dict[tuple[str, str], Mapping[str, Any]] = {}
    for old in before:
        if old["kind"] == "webhook":
            kept[("webhook", old["url"])] = old
        elif old["kind"] == "feed":
            kept[("feed", "")] = old
    filled = []
    for index, receiver in enumerate(receivers):
        one = dict(receiver)
        if MASK in str(one.get("url", "")):
            one["url"] = _unmasked(one, before, index)
        if one["kind"] == "webhook" and not one.get("secrets"):
            webhook = kept.get(("webhook", one["url"])) or {}
            one["secrets"] = list(webhook.get("secrets") or [new_secret()])
        elif one["kind"] == "feed" and not one.get("token"):
            feed = kept.get(("feed", ""))
            if feed is None:
                one["token"] = secrets.token_urlsafe(FEED_TOKEN_BYTES)
            elif feed.get("token"):  # stored before migration e5a7c9d10027 stripped them
                one["token"] = feed["token"]
        filled.append(one)
    return filled


def _unmasked(receiver: Mapping[str, Any], before: Sequence[Mapping[str, Any]], at: int) -> str:
    """The stored URL that a masked one read back stands for (a read, changed and sent back).

    Raises:
        InvalidInput: no receiver as it was has this masked URL, or several do.
    """
    found = {
        str(old["url"])
        for old in before
        if old["kind"] == receiver["kind"] and masked(old).get("url") == receiver["url"]
    }
    if len(found) == 1:
        return found.pop()
    why = "several receivers read back as this URL" if found else "no receiver had this URL"
    raise InvalidInput(
        f"a masked URL stands for the receiver it was read from: {why}; give the URL in full",
        errors=[{"loc": f"receivers[{at}].url", "field": "url", "message": why}],
    )


def token_hash(token: str) -> str:
    """What ``subscription.feed_token`` stores of a feed's token: its SHA-256, in hex.

    Not the API tokens' peppered HMAC: the migration that hashed the stored tokens has no
    pepper, and a feed token is 24 random bytes, which a plain SHA-256 keeps one-way.
    """
    return hashlib.sha256(token.encode()).hexdigest()


def stored(receivers: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``receivers`` as the subscription keeps them: without a feed's plain token.

    The token is a bearer credential for the feed: the row keeps its hash only
    (``subscription.feed_token``), so a database read or backup cannot serve the feed.
    """
    return [{k: v for k, v in r.items() if k != "token"} for r in receivers]


def feed_token(receivers: Sequence[Mapping[str, Any]]) -> str | None:
    """The token of the feed among ``receivers`` (a subscription has at most one feed).

    None as well for a feed given without one (``with_credentials`` kept the stored hash).
    """
    return next(
        (str(r["token"]) for r in receivers if r["kind"] == "feed" and r.get("token")), None
    )
