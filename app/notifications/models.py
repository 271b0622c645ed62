"""Subscriptions, the notices they are sent (the outbox), their deliveries, and silences."""

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base, UTCDateTime, utcnow


class Subscription(Base):
    """A named subscription: match and exclude rules, receivers, timing; paused or not.

    ``revision`` starts at 1 and grows by one with every change, so that a notice can say
    which version of the subscription sent it. ``source`` is ``api`` (made through the API
    or the dashboard) or ``file`` (the YAML subscriptions file owns it: changed there only).
    """

    __tablename__ = "subscription"
    __allow_unmapped__ = True  # for made_feed_token, which is never stored

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    owner: Mapped[str] = mapped_column(String(256), default="")
    match: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    exclude: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    receivers: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    when: Mapped[Any] = mapped_column(JSON, default="immediate")  # "immediate" | {digest_hours}
    paused: Mapped[bool] = mapped_column(Boolean, default=False)
    revision: Mapped[int] = mapped_column(Integer, default=1)
    source: Mapped[str] = mapped_column(String(16), default="api")
    # ``localized`` notices name the culprit commit's author by GitHub login (``@login``) and
    # show the author's email address; off, they show the author's name only.
    mention_author: Mapped[bool] = mapped_column(Boolean, default=False)
    # The SHA-256 of its feed's token, if it has one: the feed is looked up by it.
    feed_token: Mapped[str | None] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # The plain token of a feed made by the create or change that returned this object: its
    # answer shows it once (``targets.answered``); the row has only its hash.
    made_feed_token: str | None = None


class Notice(Base):
    """One event of one alert group for one subscription: the outbox row.

    Written in the transaction that caused it (a detection, a triage), so a rolled-back
    detection leaves none. ``event_key`` names the event (``g7:opened``, ``g7:grew:12``,
    ``g7:reminder:3``...): unique per subscription, so the same event planned twice, by a
    retry or a restart, is one notice. ``state``: ``planned`` (waiting for its time),
    ``sent`` (rendered; its deliveries carry it), ``silenced``, ``digested`` (carried by the
    digest ``digest_id``) or ``cancelled`` (resolved before it was due). A ``localized``
    notice (``g7:localized:5``) names its localization: it tells what that one found.
    """

    __tablename__ = "notice"
    __table_args__ = (UniqueConstraint("subscription_id", "event_key"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    subscription_id: Mapped[int] = mapped_column(
        ForeignKey("subscription.id", ondelete="CASCADE"), index=True
    )
    revision: Mapped[int] = mapped_column(Integer)  # of the subscription, when it was sent
    group_id: Mapped[int | None] = mapped_column(ForeignKey("alert_group.id"), index=True)
    localization_id: Mapped[int | None] = mapped_column(
        ForeignKey("localization.id", ondelete="SET NULL"), index=True
    )
    event: Mapped[str] = mapped_column(String(16))
    event_key: Mapped[str] = mapped_column(String(64))
    state: Mapped[str] = mapped_column(String(16), default="planned", index=True)
    findings: Mapped[int] = mapped_column(Integer, default=0)  # selected when planned or sent
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    payload: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    digest_id: Mapped[int | None] = mapped_column(ForeignKey("notice.id"))


class Delivery(Base):
    """A sent notice on its way to one receiver of its subscription.

    ``receiver_key`` names the receiver across revisions (its kind and a hash of where it
    sends), so that a changed secret is used by the next attempt and a 410 switches off the
    right receiver. ``state``: ``pending`` (due at ``next_attempt_at``), ``sending`` (an
    attempt holds it until ``lease_until``), ``delivered``, ``failed`` (given up) or
    ``cancelled`` (its receiver was removed or switched off).
    """

    __tablename__ = "delivery"
    __table_args__ = (UniqueConstraint("notice_id", "receiver_key"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    notice_id: Mapped[int] = mapped_column(ForeignKey("notice.id", ondelete="CASCADE"), index=True)
    receiver_key: Mapped[str] = mapped_column(String(64), index=True)
    kind: Mapped[str] = mapped_column(String(16))
    target: Mapped[str] = mapped_column(String(300))  # where, shown in the log (no secrets)
    state: Mapped[str] = mapped_column(String(16), default="pending", index=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_status: Mapped[int | None] = mapped_column(Integer)
    last_error: Mapped[str] = mapped_column(Text, default="")
    receipt: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class DeliveryAttempt(Base):
    """One try of a delivery: when, the answer, how long it took, what went wrong."""

    __tablename__ = "delivery_attempt"

    id: Mapped[int] = mapped_column(primary_key=True)
    delivery_id: Mapped[int] = mapped_column(
        ForeignKey("delivery.id", ondelete="CASCADE"), index=True
    )
    at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    ok: Mapped[bool] = mapped_column(Boolean)
    status: Mapped[int | None] = mapped_column(Integer)
    latency_ms: Mapped[float] = mapped_column(Float)
    error: Mapped[str] = mapped_column(Text, default="")


class Silence(Base):
    """Findings that match ``matchers`` are held back from ``starts_at`` until ``ends_at``."""

    __tablename__ = "silence"

    id: Mapped[int] = mapped_column(primary_key=True)
    matchers: Mapped[dict[str, Any]] = mapped_column(JSON)  # a rule set (schemas.Rules)
    starts_at: Mapped[datetime] = mapped_column(UTCDateTime)
    ends_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
    comment: Mapped[str] = mapped_column(Text, default="")
    created_by: Mapped[str] = mapped_column(String(200), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class IssueState(Base):
    """The state of a GitHub issue a group's bug link names, as GitHub last told it.

    Told by GitHub's ``issues`` webhook (``closed``, ``reopened``) or read by the poll when no
    webhook is set up (``app.notifications.issue_sync``). ``url``: the issue's web address, as
    a group's ``bug_url`` holds it; ``state``: ``open`` or ``closed``; ``state_reason``:
    GitHub's (``completed``, ``not_planned``, ``reopened``).
    """

    __tablename__ = "issue_state"

    id: Mapped[int] = mapped_column(primary_key=True)
    url: Mapped[str] = mapped_column(String(512), unique=True)
    repository: Mapped[str] = mapped_column(String(201))
    number: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(16), default="open")
    state_reason: Mapped[str] = mapped_column(String(32), default="")
    checked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    changed_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
