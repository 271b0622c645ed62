"""An annotation: a time (or a span), an optional machine and channel, and a text."""

from datetime import datetime

from sqlalchemy import String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base, UTCDateTime, utcnow


class Annotation(Base):
    """An event at ``at`` (until ``ends_at`` for a span such as an outage).

    ``machine`` None: it applies everywhere; otherwise to that machine (by name, so a machine
    may be annotated before it first reports), and to ``channel`` alone when that is given.
    ``project`` None: every project's (made by a token not limited to one); otherwise that
    project's, the one a project-limited token may make and delete.
    """

    __tablename__ = "annotation"

    id: Mapped[int] = mapped_column(primary_key=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
    ends_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    machine: Mapped[str | None] = mapped_column(String(128), index=True)
    channel: Mapped[str | None] = mapped_column(String(64))
    project: Mapped[str | None] = mapped_column(String(64), index=True)
    text: Mapped[str] = mapped_column(Text)
    url: Mapped[str] = mapped_column(Text, default="")
    created_by: Mapped[str] = mapped_column(String(200), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
