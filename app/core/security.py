"""Hashed API tokens and the dependencies that demand them.

A token travels as ``Authorization: Bearer <token>``. For reads only, the dashboard's sign-in
cookie carries it too (``SIGN_IN_COOKIE``: HttpOnly, SameSite=Lax), so a private server's
pages work in a browser; writes and triage always need the header, which no other site can
make a browser send.
"""

import hashlib
import hmac
from collections.abc import Callable
from datetime import timedelta
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.db import get_session, utcnow
from app.tokens.models import ApiToken

SCOPES = ("ingest", "triage", "admin", "read")
TOUCH_EVERY = timedelta(minutes=1)  # last_used_at granularity: no write per request
SIGN_IN_COOKIE = "benchwatch_token"

bearer = HTTPBearer(auto_error=False, description="`Authorization: Bearer bw_...`")
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
DbSession = Annotated[Session, Depends(get_session)]


# Built once: every authenticated request runs it.
_TOKEN_BY_HASH = select(ApiToken).where(ApiToken.token_hash == bindparam("token_hash"))


def hash_token(token: str, pepper: str) -> str:
    """Keyed hash of a token: what the database stores."""
    return hmac.new(pepper.encode(), token.encode(), hashlib.sha256).hexdigest()


def _unauthorized(detail: str) -> HTTPException:
    return HTTPException(401, detail=detail, headers={"WWW-Authenticate": "Bearer"})


def authenticate(
    request: Request, session: Session, credentials: HTTPAuthorizationCredentials | None
) -> ApiToken:
    """The live token in the request's bearer header; 401 when missing, unknown or revoked."""
    if credentials is None:
        raise _unauthorized("missing API token: send 'Authorization: Bearer <token>'")
    token = live_token(request, session, credentials.credentials)
    if token is None:
        raise _unauthorized("invalid or revoked API token")
    return token


def live_token(request: Request, session: Session, secret: str) -> ApiToken | None:
    """The unrevoked token whose secret this is, its last use noted; None if there is none."""
    settings: Settings = request.app.state.settings
    digest = hash_token(secret, settings.TOKEN_PEPPER.get_secret_value())
    token = session.scalar(_TOKEN_BY_HASH, {"token_hash": digest})
    if token is None or token.revoked_at is not None:
        return None
    now = utcnow()
    if token.last_used_at is None or now - token.last_used_at > TOUCH_EVERY:
        token.last_used_at = now
    return token


def require_scope(scope: str) -> Callable[..., ApiToken]:
    """Dependency factory: a token that has ``scope`` (or ``admin``); 403 otherwise."""

    def dependency(
        request: Request,
        session: DbSession,
        credentials: Credentials,
    ) -> ApiToken:
        token = authenticate(request, session, credentials)
        if scope not in token.scopes and "admin" not in token.scopes:
            raise HTTPException(403, detail=f"token {token.name!r} lacks the scope {scope!r}")
        return token

    return dependency


def read_access(
    request: Request,
    session: DbSession,
    credentials: Credentials,
) -> None:
    """Reads are public unless ``BENCHWATCH_PUBLIC_READ=false``; then any live token reads."""
    if not may_read(request, session, credentials):
        authenticate(request, session, credentials)  # raises 401, saying why


def may_read(
    request: Request, session: Session, credentials: HTTPAuthorizationCredentials | None
) -> bool:
    """Reads are public, or the request carries a live token (header or sign-in cookie)."""
    settings: Settings = request.app.state.settings
    if settings.PUBLIC_READ:
        return True
    secret = credentials.credentials if credentials else request.cookies.get(SIGN_IN_COOKIE)
    return secret is not None and live_token(request, session, secret) is not None
