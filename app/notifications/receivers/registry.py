"""The receiver kinds: each one module's ``KIND`` declaration, listed once here.

The subscription schema (its ``Receiver`` union and ``ReceiverRead.kind``), delivery (the
sender of a kind), a receiver's key, display and masking (``targets``) and the check of where
it sends (``service.check_receivers``) all read this registry: adding a kind is writing its
module (its shape, ``send`` and ``KIND``) and adding it to ``REGISTERED``.

Importing every kind's module loads no sender's library: Apprise's module imports Apprise
inside ``send`` only, so the API process, which validates and checks receivers, never does.
"""

from app.notifications.receivers import apprise_receiver, email, feed, github_issue, slack, webhook
from app.notifications.receivers.base import ReceiverKind

# In the order the API's schema lists them (the ``Receiver`` union, ``ReceiverRead.kind``).
REGISTERED: tuple[ReceiverKind, ...] = (
    webhook.KIND,
    email.KIND,
    slack.KIND,
    apprise_receiver.KIND,
    github_issue.KIND,
    feed.KIND,
)
BY_NAME = {kind.name: kind for kind in REGISTERED}
