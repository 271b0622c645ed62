"""API tokens and the dashboard's sign-in sessions: only keyed hashes of secrets are stored."""

from datetime import datetime

from sqlalchemy import JSON, ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.core.db import Base, UTCDateTime, utcnow
from app.core.names import PROJECT_LENGTH


class ApiToken(Base):
    """A named token with scopes (``ingest``, ``triage``, ``admin``, ``read``)."""

    __tablename__ = "api_token"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(128))
    prefix: Mapped[str] = mapped_column(String(16))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    scopes: Mapped[list[str]] = mapped_column(JSON)
    # Glob patterns of the machine names this token may ingest for; empty: any machine.
    machine_patterns: Mapped[list[str]] = mapped_column(JSON, default=list)
    # The one project whose runs and objects it may write; None: every project.
    project: Mapped[str | None] = mapped_column(String(PROJECT_LENGTH))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class WebSession(Base):
    """A browser signed in with a token: the cookie holds a random id, the row its hash.

    The session acts with its token's scopes and dies with it (revocation, expiry, sign-out).
    """

    __tablename__ = "web_session"

    id: Mapped[int] = mapped_column(primary_key=True)
    session_hash: Mapped[str] = mapped_column(String(64), unique=True)
    token_id: Mapped[int] = mapped_column(
        ForeignKey("api_token.id", ondelete="CASCADE"), index=True
    )
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)

    token: Mapped[ApiToken] = relationship(lazy="joined", innerjoin=True)
