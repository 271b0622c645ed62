"""The outbox as people use it: notices sent, each delivery's log, redelivery, test notices."""

import uuid
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.db import utcnow
from app.core.errors import Conflict, NotFound
from app.core.pagination import count_and_page
from app.core.queue import enqueue_after_commit
from app.jobs import DELIVER
from app.notifications import targets
from app.notifications.dispatch import add_deliveries
from app.notifications.message import test_message
from app.notifications.models import Delivery, DeliveryAttempt, Notice, Subscription
from app.notifications.render import iso, notice_id, subscription_of
from app.notifications.service import get_subscription

ATTEMPTS_SHOWN = 20  # per delivery in the log, newest first


def list_notices(
    session: Session, subscription_id: int, offset: int, limit: int
) -> tuple[list[dict[str, Any]], int]:
    """A page of a subscription's notices, newest first, each with its deliveries."""
    get_subscription(session, subscription_id)
    of_subscription = select(Notice).where(Notice.subscription_id == subscription_id)
    notices, total = count_and_page(session, of_subscription, [Notice.id.desc()], offset, limit)
    deliveries: dict[int, list[Delivery]] = {n.id: [] for n in notices}
    if notices:
        query = select(Delivery).where(Delivery.notice_id.in_(deliveries)).order_by(Delivery.id)
        for delivery in session.scalars(query):
            deliveries[delivery.notice_id].append(delivery)
    return [describe_notice(n, deliveries[n.id]) for n in notices], total


def notice_with_deliveries(session: Session, notice: Notice) -> dict[str, Any]:
    """One notice for the log, with its deliveries."""
    query = select(Delivery).where(Delivery.notice_id == notice.id).order_by(Delivery.id)
    return describe_notice(notice, list(session.scalars(query)))


def describe_notice(notice: Notice, deliveries: list[Delivery]) -> dict[str, Any]:
    """A notice for the log: what, when, which revision sent it, its deliveries."""
    payload = notice.payload or {}
    return {
        "id": notice.id,
        "notice_id": notice_id(notice),
        "event": notice.event,
        "group_id": notice.group_id,
        "state": notice.state,
        "revision": notice.revision,
        "findings": notice.findings,
        "headline": payload.get("headline", ""),
        "created_at": notice.created_at,
        "sent_at": notice.sent_at,
        "digest_id": notice.digest_id,
        "deliveries": [describe_delivery(d) for d in deliveries],
    }


def describe_delivery(
    delivery: Delivery, attempts: list[DeliveryAttempt] | None = None
) -> dict[str, Any]:
    """A delivery for the log (with its attempts when given)."""
    described: dict[str, Any] = {
        "id": delivery.id,
        "notice_id": delivery.notice_id,
        "kind": delivery.kind,
        "target": delivery.target,
        "state": delivery.state,
        "attempts": delivery.attempts,
        "next_attempt_at": delivery.next_attempt_at if delivery.state == "pending" else None,
        "delivered_at": delivery.delivered_at,
        "last_status": delivery.last_status,
        "last_error": delivery.last_error,
        "receipt": delivery.receipt,
    }
    if attempts is not None:
        described["log"] = [
            {
                "at": a.at,
                "ok": a.ok,
                "status": a.status,
                "latency_ms": a.latency_ms,
                "error": a.error,
            }
            for a in attempts
        ]
    return described


def get_delivery(session: Session, delivery_id: int) -> dict[str, Any]:
    """One delivery with its newest attempts."""
    delivery = _delivery(session, delivery_id)
    attempts = session.scalars(
        select(DeliveryAttempt)
        .where(DeliveryAttempt.delivery_id == delivery_id)
        .order_by(DeliveryAttempt.id.desc())
        .limit(ATTEMPTS_SHOWN)
    )
    return describe_delivery(delivery, list(attempts))


def _delivery(session: Session, delivery_id: int) -> Delivery:
    delivery = session.get(Delivery, delivery_id)
    if delivery is None:
        raise NotFound(f"no delivery {delivery_id}")
    return delivery


def redeliver(session: Session, delivery_id: int) -> Delivery:
    """Send a delivery again now (the same notice, so the same ``webhook-id``).

    Raises:
        NotFound: no delivery has this id.
        Conflict: an attempt is under way.
    """
    delivery = _delivery(session, delivery_id)
    if delivery.state == "sending":
        raise Conflict(f"delivery {delivery_id} is being attempted now; try again shortly")
    delivery.state = "pending"
    delivery.next_attempt_at = utcnow()
    delivery.lease_until = None
    session.flush()
    enqueue_after_commit(session, DELIVER, delivery_id=delivery.id)
    return delivery


def send_test_notice(session: Session, subscription_id: int, public_url: str) -> Notice:
    """A made-up notice to every switched-on receiver of the subscription, now.

    It goes through the outbox like any other, so the delivery log shows how it went.
    """
    subscription = get_subscription(session, subscription_id)
    now = utcnow()
    notice = Notice(
        subscription_id=subscription.id,
        revision=subscription.revision,
        group_id=None,
        event="test",
        event_key=f"test:{uuid.uuid4().hex}",
        state="sent",
        findings=1,
        created_at=now,
        sent_at=now,
    )
    session.add(notice)
    session.flush()
    notice.payload = dict(
        test_message(
            notice_id(notice),
            subscription_of(subscription, subscription.revision),
            public_url,
            iso(now) or "",
        ).payload
    )
    add_deliveries(session, subscription, notice)
    session.flush()
    pending = select(Delivery.id).where(
        Delivery.notice_id == notice.id, Delivery.state == "pending"
    )
    for delivery in session.scalars(pending):
        enqueue_after_commit(session, DELIVER, delivery_id=delivery)
    return notice


def feed_notices(
    session: Session, token: str, limit: int
) -> tuple[Subscription, list[Notice]] | None:
    """The subscription whose feed has ``token``, and its newest notices in that feed.

    None too for a paused subscription or a disabled feed: switched off serves nothing.
    """
    digest = targets.token_hash(token)
    subscription = session.scalar(select(Subscription).where(Subscription.feed_token == digest))
    if subscription is None or subscription.paused:
        return None
    if any(r["kind"] == "feed" and r.get("disabled") for r in subscription.receivers):
        return None
    query = (
        select(Notice)
        .join(Delivery, Delivery.notice_id == Notice.id)
        .where(
            Notice.subscription_id == subscription.id,
            Delivery.kind == "feed",
            Delivery.state == "delivered",
        )
        .order_by(Notice.sent_at.desc(), Notice.id.desc())
        .limit(limit)
    )
    return subscription, list(session.scalars(query))
