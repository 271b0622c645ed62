"""What every receiver kind declares, and what every receiver's shape has.

A receiver kind is one module of this package: its shape (a ``ReceiverBase`` subclass whose
``kind`` is ``Literal["<name>"]``), its ``send`` and, last, its ``KIND = ReceiverKind(...)``;
then one entry in ``REGISTERED`` in ``registry.py``. The subscription schema
(``schemas.Receiver``, ``ReceiverRead.kind``), delivery, a receiver's key, display and masking
(``targets.py``) and the check of where it sends (``service.check_receivers``) read the
registry. The hooks' defaults are those of a receiver that sends to its ``url``, which may
hold its credential: it is shown as its host, and checked by the SSRF guard; a kind that
sends elsewhere says so (a ``url`` it does not have fails loudly, not silently unchecked).
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, get_args
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from app.core.bounds import NulFree
from app.core.urls import HttpUrlText
from app.notifications import guard
from app.notifications.receivers import Sender

Url = Annotated[HttpUrlText, Field(min_length=1)]
MASK = "…"  # what stands for the masked part of a credential in a read
TARGET_CHARS = 300  # of where a receiver sends, as people see it


class ReceiverBase(BaseModel):
    """What every receiver has: whether delivery switched it off (an HTTP 410), and why.

    Set ``disabled`` back to false to switch it on again.
    """

    model_config = ConfigDict(extra="forbid")

    if TYPE_CHECKING:  # each kind's shape declares it, as Literal["<name>"], after these
        kind: str

    disabled: StrictBool = False
    disabled_reason: Annotated[str, NulFree, Field(max_length=500)] = ""


Receiver = Mapping[str, Any]  # a receiver as stored: its shape's values, dumped as JSON
Check = Callable[[Receiver, guard.AllowList, str], None]


def url_of(receiver: Receiver) -> str:
    """A receiver's ``url``: where most kinds send."""
    return str(receiver["url"])


def host_of(receiver: Receiver) -> str:
    """A receiver's URL as scheme, host and port: its path and query may be the credential."""
    parts = urlsplit(url_of(receiver))
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{parts.hostname or ''}{port}/{MASK}"[:TARGET_CHARS]


def as_stored(receiver: Receiver) -> dict[str, Any]:
    """A receiver as reads show it when no field of its own is a credential."""
    return dict(receiver)


def host_only(receiver: Receiver) -> dict[str, Any]:
    """A receiver whose URL is its credential, shown as scheme, host and port (``host_of``)."""
    return {**receiver, "url": host_of(receiver)}


def nothing_to_check(receiver: Receiver, allow: guard.AllowList, apprise_schemes: str) -> None:
    """A receiver that sends nowhere a subscription's author chooses (a feed, the SMTP server)."""


def check_url(receiver: Receiver, allow: guard.AllowList, apprise_schemes: str) -> None:
    """The SSRF guard on the receiver's http(s) URL; a name that does not resolve yet passes.

    Raises:
        ValueError: the guard refuses it (``guard.Refused``), in a sentence for its author.
    """
    guard.check_target(url_of(receiver), allow, unresolved_ok=True)


@dataclass(frozen=True)
class ReceiverKind:
    """One receiver kind, declared once by its module (``KIND``) and found by the registry.

    Attributes:
        name: the ``kind`` of its receivers, the one value of its shape's ``kind`` Literal.
        schema: its shape, as the API takes it and the subscription stores it.
        send: its sender (``receivers.Sender``); it runs in a delivery job only, so a module
            whose library is slow to load imports it inside ``send`` (as Apprise's does).
        where: what a receiver sends to, in full, credentials included: its key
            (``targets.receiver_key``) is a hash of it, the same receiver in every revision.
        target: where it sends, for people (the delivery log), without credentials.
        masked: the receiver as reads show it, the credentials in its own fields masked
            (signing ``secrets`` and a ``token`` are masked for every kind by
            ``targets.masked``).
        check: ``check(receiver, allow, apprise_schemes)`` refuses, with a ValueError, a
            ``url`` it must not send to (``allow``: the operator's SSRF allow list; the
            Apprise schemes allowed); run when receivers are made or changed.
    """

    name: str
    schema: type[ReceiverBase]
    send: Sender
    where: Callable[[Receiver], str] = url_of
    target: Callable[[Receiver], str] = host_of
    masked: Callable[[Receiver], dict[str, Any]] = host_only
    check: Check = check_url

    def __post_init__(self) -> None:
        kind = self.schema.model_fields.get("kind")
        if kind is None or get_args(kind.annotation) != (self.name,):
            raise TypeError(f"{self.schema.__name__}.kind must be Literal[{self.name!r}]")
