"""Who a request acts for: hashed API tokens, the dashboard's sign-in sessions, CSRF.

An API client sends ``Authorization: Bearer <token>``. A browser signs in once with a token
(``/login``) and then carries the sign-in cookie (``sign_in_cookie``): a random session id
(HttpOnly, SameSite=Strict; over https ``__Host-`` prefixed and Secure), whose keyed hash is
the ``web_session`` row that names the token. The session acts with the token's scopes; a write
it makes must also carry ``CSRF_HEADER``, a value derived from the session id that only the
server's own pages know (the cookie is what another site could make a browser send, the header
is not). Reads never write: a token's last use is noted by writes alone, so a private server's
reader takes no row or SQLite write lock.
"""

import hmac
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.db import SessionDep, utcnow
from app.tokens.models import ApiToken, WebSession
from app.tokens.service import hash_token

TOUCH_EVERY = timedelta(minutes=1)  # last_used_at granularity: no write per request
SIGN_IN_COOKIE = "benchwatch_session"  # over plain http (a local server)
# Over https: a browser keeps a ``__Host-`` cookie only when it is Secure, has Path=/ and no
# Domain, so a sibling subdomain (or a plain-http page) cannot set or shadow it.
SECURE_SIGN_IN_COOKIE = f"__Host-{SIGN_IN_COOKIE}"
CSRF_HEADER = "X-CSRF-Token"
MISSING_TOKEN = "missing API token: send 'Authorization: Bearer <token>'"
INVALID_TOKEN = "invalid or revoked API token"
MAX_SECRET_LENGTH = 256  # longer bearer tokens or cookies are not ours: no hashing of megabytes

bearer = HTTPBearer(auto_error=False, description="`Authorization: Bearer bw_...`")
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]


# Built once: every authenticated request runs one of them.
_TOKEN_BY_HASH = select(ApiToken).where(ApiToken.token_hash == bindparam("token_hash"))
_SESSION_BY_HASH = select(WebSession).where(WebSession.session_hash == bindparam("session_hash"))


@dataclass(frozen=True)
class Actor:
    """The token a request acts with, and the dashboard session it came through, if any."""

    token: ApiToken
    session_id: int | None = None

    @property
    def label(self) -> str:
        """Who did it, as recorded beside what they did (the token's name and how it came)."""
        via = f"dashboard session #{self.session_id}" if self.session_id else "API"
        return f"{self.token.name} (token #{self.token.id}, {via})"


def request_pepper(request: Request) -> str:
    """The secret key of token and session hashes, from the app's settings."""
    settings: Settings = request.app.state.settings
    return settings.TOKEN_PEPPER.get_secret_value()


def _unauthorized(detail: str) -> HTTPException:
    return HTTPException(401, detail=detail, headers={"WWW-Authenticate": "Bearer"})


def live_token(
    request: Request, session: Session, secret: str, *, touch: bool = True
) -> ApiToken | None:
    """The unrevoked token whose secret this is; None if there is none.

    ``touch`` notes its last use (at most once a minute): writes do, reads do not.
    """
    if len(secret) > MAX_SECRET_LENGTH:
        return None
    token = session.scalar(
        _TOKEN_BY_HASH, {"token_hash": hash_token(secret, request_pepper(request))}
    )
    if token is None or token.revoked_at is not None:
        return None
    now = utcnow()
    if touch and (token.last_used_at is None or now - token.last_used_at > TOUCH_EVERY):
        token.last_used_at = now
    return token


def sign_in_cookie(request: Request) -> str:
    """The sign-in cookie's name for this request's scheme.

    ``__Host-`` needs Secure, which a browser refuses to store over plain http, so a server
    on http://127.0.0.1 uses the plain name; over https (or a trusted proxy saying so) only the
    prefixed one is read, so that a plain cookie planted by another host counts for nothing.
    """
    return SECURE_SIGN_IN_COOKIE if request.url.scheme == "https" else SIGN_IN_COOKIE


def session_secret(request: Request) -> str | None:
    """The session id the request's sign-in cookie carries, if any."""
    return request.cookies.get(sign_in_cookie(request))


def signed_in(request: Request, session: Session) -> WebSession | None:
    """The live sign-in session of the request's cookie (looked up once per request)."""
    if hasattr(request.state, "web_session"):
        found: WebSession | None = request.state.web_session
        return found
    found = live_session(request, session)
    request.state.web_session = found
    return found


def live_session(request: Request, session: Session) -> WebSession | None:
    """The live sign-in session of the request's cookie, looked up afresh (nothing cached)."""
    secret = session_secret(request)
    if not secret or len(secret) > MAX_SECRET_LENGTH:
        return None
    digest = hash_token(secret, request_pepper(request))
    row = session.scalar(_SESSION_BY_HASH, {"session_hash": digest})
    if row is not None and row.expires_at > utcnow() and row.token.revoked_at is None:
        return row
    return None


def check_caller(
    request: Request, session: Session, credentials: HTTPAuthorizationCredentials | None
) -> None:
    """401 unless the request carries a live token or sign-in session; reads, keeps nothing.

    FastAPI reads and parses a route's body before it runs the route's dependencies, so a
    route with a body calls this first: an anonymous 40 MB write is refused unread.
    """
    if credentials is not None:
        if live_token(request, session, credentials.credentials, touch=False) is None:
            raise _unauthorized(INVALID_TOKEN)
    elif live_session(request, session) is None:
        raise _unauthorized(MISSING_TOKEN)


def csrf_token(request: Request, session: Session) -> str | None:
    """The value a signed-in page sends in ``CSRF_HEADER`` with its writes; None if signed out."""
    secret = session_secret(request)
    if signed_in(request, session) is None or secret is None:
        return None
    return hash_token(f"csrf:{secret}", request_pepper(request))


def csrf_matches(request: Request, session: Session, sent: str) -> bool:
    """Whether ``sent`` is the CSRF value of the request's live sign-in session."""
    expected = csrf_token(request, session)
    return expected is not None and hmac.compare_digest(sent, expected)


def authenticate(
    request: Request, session: Session, credentials: HTTPAuthorizationCredentials | None
) -> Actor:
    """Who the request acts for: the bearer token, else the sign-in session with its CSRF value.

    401 when there is neither, or the token is unknown or revoked; 403 when a session's write
    lacks the CSRF value of its page.
    """
    if credentials is not None:
        token = live_token(request, session, credentials.credentials)
        if token is None:
            raise _unauthorized(INVALID_TOKEN)
        return Actor(token)
    web_session = signed_in(request, session)
    if web_session is None:
        raise _unauthorized(MISSING_TOKEN)
    if not csrf_matches(request, session, request.headers.get(CSRF_HEADER, "")):
        raise HTTPException(
            403, detail=f"a signed-in browser's write needs the page's {CSRF_HEADER} header"
        )
    return Actor(web_session.token, web_session.id)


def holds(token: ApiToken, scope: str) -> bool:
    """Whether ``token`` may do what ``scope`` allows: ``admin`` allows what every scope does.

    The one rule for the API's routes and the dashboard's pages and forms alike.
    """
    return scope in token.scopes or "admin" in token.scopes


def require_actor(scope: str) -> Callable[..., Actor]:
    """Dependency factory: who acts, holding ``scope`` (or ``admin``); 401/403 otherwise."""

    def dependency(request: Request, session: SessionDep, credentials: Credentials) -> Actor:
        actor = authenticate(request, session, credentials)
        if not holds(actor.token, scope):
            raise HTTPException(403, detail=f"token {actor.token.name!r} lacks the scope {scope!r}")
        return actor

    return dependency


def require_scope(scope: str) -> Callable[..., ApiToken]:
    """Dependency factory: a token that has ``scope`` (or ``admin``); 401/403 otherwise."""
    actor_of = require_actor(scope)

    def dependency(request: Request, session: SessionDep, credentials: Credentials) -> ApiToken:
        return actor_of(request, session, credentials).token

    return dependency


def read_access(
    request: Request,
    session: SessionDep,
    credentials: Credentials,
) -> None:
    """Reads are public unless ``BENCHWATCH_PUBLIC_READ=false``; then any live token reads."""
    if not may_read(request, session, credentials):
        if credentials is not None:
            raise _unauthorized(INVALID_TOKEN)
        raise _unauthorized(MISSING_TOKEN)


def identified(
    request: Request, session: Session, credentials: HTTPAuthorizationCredentials | None
) -> bool:
    """Whether the request carries a live token or sign-in session, of any scope.

    Who may read what anonymous readers do not, such as a failed process's output.
    """
    if credentials is not None:
        return live_token(request, session, credentials.credentials, touch=False) is not None
    return signed_in(request, session) is not None


def may_read(
    request: Request, session: Session, credentials: HTTPAuthorizationCredentials | None
) -> bool:
    """Reads are public, or the request carries a live token or sign-in session."""
    settings: Settings = request.app.state.settings
    if settings.PUBLIC_READ:
        return True
    if credentials is not None:
        return live_token(request, session, credentials.credentials, touch=False) is not None
    return signed_in(request, session) is not None
