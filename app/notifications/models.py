"""Subscriptions: who wants which findings, where and when (rules and receivers as JSON)."""

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base, UTCDateTime, utcnow


class Subscription(Base):
    """A named subscription: match and exclude rules, receivers, timing; paused or not.

    ``revision`` starts at 1 and grows by one with every change, so that a notice can say
    which version of the subscription sent it.
    """

    __tablename__ = "subscription"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    owner: Mapped[str] = mapped_column(String(256), default="")
    match: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    exclude: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    receivers: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    when: Mapped[Any] = mapped_column(JSON, default="immediate")  # "immediate" | {digest_hours}
    paused: Mapped[bool] = mapped_column(Boolean, default=False)
    revision: Mapped[int] = mapped_column(Integer, default=1)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
