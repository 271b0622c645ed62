"""A request id per HTTP request: taken from ``X-Request-ID`` when sane, else made; echoed back.

The id lives in a context variable for the request's duration, so every log record written
while it is served (in the event loop or in the threadpool FastAPI runs routes in: both copy
the context) carries it (``RequestIdFilter``). A proxy's id is kept so one request can be
followed from the proxy's log into this one; anything else a client sends is replaced, so a
header cannot forge log lines or grow them.
"""

import logging
import re
import uuid
from contextvars import ContextVar

from starlette.types import ASGIApp, Message, Receive, Scope, Send

HEADER = "X-Request-ID"
NONE = "-"  # outside a request: start-up, background jobs
SANE = re.compile(r"[A-Za-z0-9._:+/=-]{1,128}")
request_id: ContextVar[str] = ContextVar("request_id", default=NONE)


def accept_or_make(sent: str | None) -> str:
    """The sent id if it is short and plain, else a fresh one."""
    if sent is not None and SANE.fullmatch(sent):
        return sent
    return uuid.uuid4().hex


class RequestId:
    """ASGI middleware: set the request id for the request, and answer with it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pick the id, run the request under it, add it to the answer's headers."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        sent = next((v for k, v in scope["headers"] if k.lower() == HEADER.lower().encode()), None)
        rid = accept_or_make(sent.decode("latin-1") if sent is not None else None)
        header = (HEADER.lower().encode(), rid.encode())

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), header]}
            await send(message)

        token = request_id.set(rid)
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            request_id.reset(token)


class RequestIdFilter(logging.Filter):
    """Adds ``request_id`` to every record (``-`` outside a request); filters nothing out."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Note the current request's id on the record."""
        if not hasattr(record, "request_id"):
            record.request_id = request_id.get()
        return True
