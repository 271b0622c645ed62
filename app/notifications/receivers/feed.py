"""The Atom feed receiver: a notice is delivered when it is written; readers fetch the feed.

The feed itself (``notifications.feed``) lists the notices whose feed delivery is done.
"""

from collections.abc import Mapping
from typing import Any

from app.notifications.message import Message
from app.notifications.receivers import Outcome, SendContext


def send(receiver: Mapping[str, Any], message: Message, context: SendContext) -> Outcome:
    """Nothing to send: the notice is in the feed from now on."""
    return Outcome(ok=True)
