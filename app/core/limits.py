"""Refuse request bodies over the configured size with a 413, before they are read whole."""

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core.errors import error_body


class BodySizeLimit:
    """ASGI middleware: 413 when Content-Length or the streamed body exceeds ``max_bytes``.

    A streamed body over the limit is answered at once; the app then sees the client
    disconnect, so nothing it was about to write is committed.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check the declared length, then count what is streamed."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._reject(send)
            return
        received = 0
        answered = False  # once the 413 is sent, whatever the app answers is dropped

        async def counting_receive() -> Message:
            nonlocal received, answered
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.max_bytes and not answered:
                answered = True
                await self._reject(send)
            return {"type": "http.disconnect"} if answered else message

        async def guarded_send(message: Message) -> None:
            if not answered:
                await send(message)

        await self.app(scope, counting_receive, guarded_send)

    async def _reject(self, send: Send) -> None:
        body = json.dumps(
            error_body(
                "PayloadTooLarge",
                f"request body is over the limit of {self.max_bytes} bytes "
                "(BENCHWATCH_MAX_BODY_BYTES); split the upload into several runs",
            )
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
