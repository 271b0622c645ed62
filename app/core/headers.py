"""Security headers on every answer, and an API docs page that lives under the same policy.

Pages run only scripts served by benchwatch itself (``script-src 'self'``, no inline script),
cannot be framed, and send no referrer to other sites. Plotly sets inline styles, so styles
allow them; nothing else does. The interactive API docs load Swagger UI from the CDN FastAPI
names by default, so their page widens ``script-src`` and ``style-src`` to that origin alone,
and its start-up script, inline in FastAPI's page, is served as a file here.
"""

import re
from urllib.parse import urlsplit

from fastapi import APIRouter, FastAPI, Response
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

PAGE_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self'; connect-src 'self'; object-src 'none'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
COMMON = (
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"strict-origin-when-cross-origin"),
    (b"x-frame-options", b"DENY"),
)
_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)


class SecurityHeaders:
    """ASGI middleware: the page policy and the common headers, unless a route set its own."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Add the headers to the start of every HTTP answer."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                if b"content-security-policy" not in present:
                    headers.append((b"content-security-policy", PAGE_POLICY.encode()))
                headers.extend(h for h in COMMON if h[0] not in present)
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def docs_router(application: FastAPI) -> APIRouter:
    """``/docs``: FastAPI's Swagger UI page, its inline start-up script moved to a file."""
    body = get_swagger_ui_html(
        openapi_url=application.openapi_url or "/openapi.json",
        title=f"{application.title} API",
        swagger_favicon_url="data:,",
    ).body
    html = bytes(body).decode()
    start = _INLINE_SCRIPT.search(html)
    assert start is not None, "FastAPI's Swagger UI page has no inline start-up script"
    page = html.replace(start.group(0), '<script src="/docs/start.js"></script>')
    script = start.group(1)
    cdn = "{0.scheme}://{0.netloc}".format(urlsplit(_default_swagger_js()))
    policy = PAGE_POLICY.replace("script-src 'self'", f"script-src 'self' {cdn}").replace(
        "style-src 'self'", f"style-src 'self' {cdn}"
    )
    router = APIRouter(include_in_schema=False)

    @router.get("/docs")
    def docs() -> HTMLResponse:
        return HTMLResponse(page, headers={"Content-Security-Policy": policy})

    @router.get("/docs/start.js")
    def docs_start() -> Response:
        return Response(script, media_type="text/javascript")

    return router


def _default_swagger_js() -> str:
    defaults = get_swagger_ui_html.__kwdefaults__ or {}
    return str(defaults["swagger_js_url"])
