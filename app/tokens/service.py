"""Create, list and revoke API tokens; the plain token is shown once and never stored."""

import secrets

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.db import utcnow
from app.core.errors import InvalidInput, NotFound
from app.core.security import SCOPES, hash_token
from app.tokens.models import ApiToken

TOKEN_PREFIX = "bw_"


class TokenNotFound(NotFound):
    """No token with this id or name."""

    def __init__(self, ident: str) -> None:
        super().__init__(f"no token with id or name {ident!r}")


def create_token(
    session: Session, name: str, scopes: list[str], pepper: str
) -> tuple[ApiToken, str]:
    """A new token and its plain text (to show once)."""
    if unknown := sorted(set(scopes) - set(SCOPES)):
        raise InvalidInput(f"unknown scope(s) {unknown}; known: {list(SCOPES)}")
    if not scopes:
        raise InvalidInput(f"a token needs at least one scope of {list(SCOPES)}")
    plain = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken(
        name=name,
        prefix=plain[:10],
        token_hash=hash_token(plain, pepper),
        scopes=sorted(set(scopes)),
        created_at=utcnow(),
    )
    session.add(token)
    session.flush()
    return token, plain


def list_tokens(session: Session) -> list[ApiToken]:
    """Every token, oldest first (revoked ones too)."""
    return list(session.scalars(select(ApiToken).order_by(ApiToken.id)))


def revoke_token(session: Session, ident: str) -> list[ApiToken]:
    """Revoke the token with this id, or every live token with this name."""
    query = select(ApiToken).where(ApiToken.revoked_at.is_(None))
    if ident.isdigit():
        query = query.where(ApiToken.id == int(ident))
    else:
        query = query.where(ApiToken.name == ident)
    tokens = list(session.scalars(query))
    if not tokens:
        raise TokenNotFound(ident)
    for token in tokens:
        token.revoked_at = utcnow()
    session.flush()
    return tokens
