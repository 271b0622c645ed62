"""Receivers: each kind sends a notice somewhere and says how it went.

A sender is ``send(receiver, message, context) -> Outcome``: ``receiver`` is the stored,
validated receiver (``schemas``), ``message`` the notice, ``context`` what the operator
configured. A sender raises nothing for a failed delivery: the outcome says whether to try
again (``retry``) and whether the receiver asked to be switched off (``disable``, an HTTP 410).
Senders run in the delivery job only (a worker, or the in-process runner), never in a request.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from app.notifications.message import Message


@dataclass(frozen=True)
class Outcome:
    """How one attempt went.

    Attributes:
        ok: delivered.
        status: the HTTP status (or SMTP reply code) when there was one.
        latency_ms: from the start of the attempt to its answer.
        error: why it failed, one line (empty when ok).
        retry: a failure worth trying again later (a timeout, a 5xx, a 429).
        disable: the receiver is gone for good (a 410): switch it off.
        receipt: what the receiver gave back that a later notice of the same group needs
            (a GitHub issue's number), stored with the delivery.
        retry_after_s: how long the receiver asked to be left alone (``Retry-After``, a
            rate limit's reset): the next attempt waits at least this long.
    """

    ok: bool
    status: int | None = None
    latency_ms: float = 0.0
    error: str = ""
    retry: bool = False
    disable: bool = False
    receipt: Mapping[str, Any] = field(default_factory=dict)
    retry_after_s: float | None = None


@dataclass(frozen=True)
class SendContext:
    """What the operator configured for delivery (``core.config.Settings``), and the past.

    ``previous_receipt``: the receipt of the last delivery of the same alert group to the
    same receiver, if any (a GitHub issue to update instead of opening another).
    """

    public_url: str
    receiver_allow: str = ""
    timeout_s: float = 10.0
    max_response_bytes: int = 64 * 1024
    smtp_host: str = ""
    smtp_port: int = 587
    smtp_starttls: bool = True
    smtp_implicit_tls: bool = False
    smtp_username: str = ""
    smtp_password: str = ""
    smtp_from: str = "benchwatch@localhost"
    github_api_url: str = "https://api.github.com"
    github_token: str = ""
    apprise_schemes: str = "workflows,discord,mmost,mmosts"
    previous_receipt: Mapping[str, Any] | None = None


class Sender(Protocol):
    """Sends one notice to one receiver."""

    def __call__(
        self, receiver: Mapping[str, Any], message: Message, context: SendContext
    ) -> Outcome:
        """One attempt; never raises for a delivery that failed."""
