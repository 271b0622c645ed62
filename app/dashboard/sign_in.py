"""Signing in to a private server's dashboard (``BENCHWATCH_PUBLIC_READ=false``).

A page asked for without a live token redirects to ``/login?next=<the page>``. The form
takes any live API token (a ``read`` token is enough), checks it and keeps it in an HttpOnly,
SameSite=Lax cookie that reads accept (``app.core.security``); ``/logout`` drops it.
"""

from urllib.parse import quote

from fastapi import Request
from fastapi.responses import RedirectResponse, Response

from app.core.security import SIGN_IN_COOKIE, Credentials, DbSession, may_read

SIGN_IN_DAYS = 14  # how long a browser stays signed in


class SignInRequired(Exception):
    """A dashboard page was asked for without a token that may read."""

    def __init__(self, wanted: str) -> None:
        super().__init__(wanted)
        self.wanted = wanted


def page_access(request: Request, session: DbSession, credentials: Credentials) -> None:
    """Dashboard pages: like API reads, but a browser without a token is sent to sign in."""
    if not may_read(request, session, credentials):
        query = f"?{request.url.query}" if request.url.query else ""
        raise SignInRequired(request.url.path + query)


async def to_sign_in(request: Request, exc: Exception) -> Response:
    """Redirect to the sign-in form, which comes back to the page asked for."""
    assert isinstance(exc, SignInRequired)
    return RedirectResponse(f"/login?next={quote(exc.wanted, safe='')}", status_code=303)


def safe_next(wanted: str | None) -> str:
    """A path on this server to return to, never another site (``//host``, a backslash)."""
    if not wanted or not wanted.startswith("/") or wanted.startswith(("//", "/\\")):
        return "/"
    return wanted


def remember(response: Response, token: str, secure: bool) -> Response:
    """Keep the token in the browser's sign-in cookie, out of reach of page scripts."""
    response.set_cookie(
        SIGN_IN_COOKIE,
        token,
        max_age=SIGN_IN_DAYS * 24 * 3600,
        httponly=True,
        samesite="lax",
        secure=secure,
    )
    return response


def forget(response: Response) -> Response:
    """Drop the sign-in cookie."""
    response.delete_cookie(SIGN_IN_COOKIE, httponly=True, samesite="lax")
    return response
