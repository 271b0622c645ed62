"""Signing in to the dashboard: for a private server's pages, and for triage on any server.

A page of a private server (``BENCHWATCH_PUBLIC_READ=false``) asked for without a live token
redirects to ``/login?next=<the page>``. The form (its routes: ``app.dashboard.login``) takes
any live API token, checks it and opens a sign-in session (``app.tokens.service.open_session``):
the browser keeps only the session's random id, in an HttpOnly, SameSite=Strict cookie; when the
request came over https (behind a proxy: ``--proxy-headers --forwarded-allow-ips``) it is Secure
and named ``__Host-...`` (``app.tokens.auth.sign_in_cookie``). Signing in ends the token's
earlier session; ``/logout`` closes it.

The form is refused when another site posts it (``from_this_site``).

A SameSite=Strict cookie is not sent on the first request of a link followed from another
site (a chat message, a mail): the sign-in form then reloads itself once from this site
(``again=1``), which does carry the cookie, so a signed-in reader lands on the page.
"""

from urllib.parse import quote

from fastapi import Request
from fastapi.responses import RedirectResponse, Response

from app.core import ratelimit
from app.core.config import Settings
from app.core.ratelimit import TokenBuckets
from app.tokens.auth import sign_in_cookie
from app.tokens.service import SESSION_DAYS


class SignInRequired(Exception):
    """A dashboard page was asked for without a token that may read."""

    def __init__(self, wanted: str) -> None:
        super().__init__(wanted)
        self.wanted = wanted


def sign_in_url(wanted: str) -> str:
    """The sign-in form that comes back to ``wanted``."""
    return f"/login?next={quote(wanted, safe='')}"


async def to_sign_in(request: Request, exc: Exception) -> Response:
    """Redirect to the sign-in form, which comes back to the page asked for."""
    assert isinstance(exc, SignInRequired)
    return RedirectResponse(sign_in_url(exc.wanted), status_code=303)


def from_this_site(request: Request) -> bool:
    """Whether a form was posted from a page of this server, as far as the browser says.

    Refusing other sites' posts to ``/login`` stops login CSRF: a page elsewhere signing its
    visitor in under the attacker's token, so that the visitor's triage is the attacker's.
    Browsers send ``Sec-Fetch-Site`` and ``Origin`` with a form post; a client that sends
    neither (curl, a script) is not a browser another site can steer.
    """
    site = request.headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return False
    origin = request.headers.get("origin")
    return origin is None or origin == f"{request.url.scheme}://{request.url.netloc}"


def safe_next(wanted: str | None) -> str:
    """A path on this server to return to, never another site (``//host``, a backslash)."""
    if (
        not wanted
        or not wanted.startswith("/")
        or wanted.startswith(("//", "/\\"))
        or not wanted.isprintable()
    ):
        return "/"
    return wanted


def remember(response: Response, request: Request, session_id: str) -> Response:
    """Keep the sign-in session's id in the browser, out of reach of page scripts.

    Over https the cookie is ``__Host-`` prefixed: Secure, Path=/ and no Domain, as the prefix
    demands (Starlette sets no Domain unless asked).
    """
    response.set_cookie(
        sign_in_cookie(request),
        session_id,
        max_age=SESSION_DAYS * 24 * 3600,
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


def forget(response: Response, request: Request) -> Response:
    """Drop the sign-in cookie."""
    response.delete_cookie(
        sign_in_cookie(request),
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


def sign_in_failures(request: Request) -> tuple[TokenBuckets | None, str]:
    """The app's buckets of failed sign-ins per client address, and this request's address.

    Guessing a token is hopeless (32 random bytes), but each guess costs a hash and a
    lookup, and an unlimited form invites trying leaked ones in bulk.
    """
    settings: Settings = request.app.state.settings
    buckets = ratelimit.buckets_of(
        request.app.state,
        "sign_in_failures",
        settings.LOGIN_FAIL_LIMIT,
        settings.LOGIN_FAIL_WINDOW_S,
    )
    return buckets, request.client.host if request.client else "unknown"
