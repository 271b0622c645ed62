"""The Atom feed receiver: a notice is delivered when it is written; readers fetch the feed.

The feed itself (``notifications.feed``) lists the notices whose feed delivery is done.
"""

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field

from app.notifications.message import Message
from app.notifications.receivers import Outcome, SendContext
from app.notifications.receivers.base import (
    ReceiverBase,
    ReceiverKind,
    as_stored,
    nothing_to_check,
)


class FeedReceiver(ReceiverBase):
    """An Atom feed of the subscription's notices at ``/feeds/<token>.atom``.

    ``token`` is made when the receiver is (the feed needs no other credential: keep the URL
    to yourself); left out on a change, the receiver keeps the one it had.
    """

    kind: Literal["feed"]
    token: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{32,64}$")] | None = None


def send(receiver: Mapping[str, Any], message: Message, context: SendContext) -> Outcome:
    """Nothing to send: the notice is in the feed from now on."""
    return Outcome(ok=True)


def _where(receiver: Mapping[str, Any]) -> str:
    return ""  # one feed a subscription, its token never stored: the kind says which


def _target(receiver: Mapping[str, Any]) -> str:
    return "Atom feed"


# Its token is left out of every read as every kind's is (targets.masked).
KIND = ReceiverKind(
    "feed",
    FeedReceiver,
    send,
    where=_where,
    target=_target,
    masked=as_stored,
    check=nothing_to_check,
)
