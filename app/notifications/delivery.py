"""One delivery attempt: claim the delivery, send it, record how it went, plan the next try.

The claim is a conditional update (``pending`` and due, or ``sending`` with its lease run
out, becomes ``sending`` with a new lease), so of two tasks for the same delivery (the sweep
queued it twice, the broker redelivered it) only one sends. No transaction is held while
the receiver answers. A sender that dies mid-send leaves the delivery ``sending``; when its
lease ends, the sweep queues it again and the receiver gets the same notice (the same
``webhook-id``) a second time: delivery is at least once, and exactly once to a receiver
that deduplicates on the id, as Standard Webhooks asks receivers to.
"""

import logging
import random
import time
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from prometheus_client import Counter
from sqlalchemy import and_, or_, select, update
from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.db import Database, utcnow
from app.notifications import issue_sync
from app.notifications.message import Message
from app.notifications.models import Delivery, DeliveryAttempt, Notice, Subscription
from app.notifications.receivers import Outcome, SendContext, Sender
from app.notifications.receivers.registry import BY_NAME
from app.notifications.render import notice_id
from app.notifications.targets import receiver_key

log = logging.getLogger(__name__)

MAX_DELAY_S = 7200.0  # between two attempts, however many failed
ERROR_CHARS = 1000  # of an error kept in the log
# Each attempt that reported back, by receiver kind and outcome: delivered (this attempt), retry
# (it failed; the delivery is tried again later) or failed (it failed; the delivery gave up).
ATTEMPTS = Counter(
    "benchwatch_notification_attempts",
    "Notification delivery attempts by receiver kind and outcome (delivered, retry, failed)",
    ["kind", "outcome"],
)


def sender(kind: str) -> Sender:
    """The send function of a receiver kind (``receivers.registry``).

    A sender whose library is slow to load (Apprise) imports it when it first sends, so it
    loads in a worker only.
    """
    return BY_NAME[kind].send


def context_of(settings: Settings, previous_receipt: Mapping[str, Any] | None) -> SendContext:
    """What senders need of the settings, and the group's last receipt at this receiver."""
    return SendContext(
        public_url=settings.PUBLIC_URL,
        receiver_allow=settings.RECEIVER_ALLOW,
        timeout_s=settings.DELIVERY_TIMEOUT_S,
        smtp_host=settings.SMTP_HOST,
        smtp_port=settings.SMTP_PORT,
        smtp_starttls=settings.SMTP_STARTTLS,
        smtp_implicit_tls=settings.SMTP_IMPLICIT_TLS,
        smtp_username=settings.SMTP_USERNAME,
        smtp_password=settings.SMTP_PASSWORD.get_secret_value(),
        smtp_from=settings.SMTP_FROM,
        github_api_url=settings.GITHUB_API_URL,
        github_token=settings.GITHUB_TOKEN.get_secret_value(),
        apprise_schemes=settings.APPRISE_SCHEMES,
        previous_receipt=previous_receipt,
    )


def delay_s(attempts: int, base_s: float) -> float:
    """How long after failed attempt number ``attempts`` the next one waits.

    Doubling from ``base_s``, capped, with "equal jitter" (half fixed, half random), so
    receivers that failed together are not all retried in the same second.
    """
    full: float = min(base_s * 2.0 ** max(attempts - 1, 0), MAX_DELAY_S)
    jitter: float = random.uniform(0, full / 2)
    return full / 2 + jitter


def deliver(database: Database, settings: Settings, delivery_id: int) -> str:
    """One attempt of a delivery; what became of it (``skipped`` when another holds it)."""
    lease_until = utcnow() + timedelta(seconds=settings.DELIVERY_LEASE_S)
    with database.session_scope() as session:
        if not claim(session, delivery_id, lease_until):
            return "skipped"
        prepared = _prepare(session, settings, delivery_id)
    if prepared is None:
        return "cancelled"
    receiver, message, context = prepared
    started = time.perf_counter()
    try:
        outcome = sender(receiver["kind"])(receiver, message, context)
    except Exception as exc:  # a sender's bug must not leave the delivery leased for nothing
        log.exception("delivery %s: the %s sender failed", delivery_id, receiver["kind"])
        elapsed = (time.perf_counter() - started) * 1000
        outcome = Outcome(ok=False, latency_ms=elapsed, error=f"sender error: {exc}", retry=True)
    with database.session_scope() as session:
        state = record(session, settings, delivery_id, outcome, utcnow(), lease_until)
    counted = "delivered" if outcome.ok else "failed" if state == "failed" else "retry"
    ATTEMPTS.labels(kind=receiver["kind"], outcome=counted).inc()
    return state


def claim(session: Session, delivery_id: int, lease_until: datetime) -> bool:
    """Take the delivery for one attempt, until ``lease_until``, if it is due and free.

    The lease is also the attempt's mark: ``record`` keeps the outcome for the delivery only
    while the lease is still this one (an attempt that outlived it was superseded).
    """
    now = utcnow()
    taken = session.execute(
        update(Delivery)
        .where(
            Delivery.id == delivery_id,
            or_(
                and_(Delivery.state == "pending", Delivery.next_attempt_at <= now),
                and_(Delivery.state == "sending", Delivery.lease_until < now),
            ),
        )
        .values(state="sending", lease_until=lease_until, attempts=Delivery.attempts + 1)
        .execution_options(synchronize_session=False)
    )
    return bool(taken.rowcount)  # type: ignore[attr-defined]


def current_receiver(subscription: Subscription, key: str) -> dict[str, Any] | None:
    """The subscription's receiver with this key as it is now (None: removed)."""
    return next((r for r in subscription.receivers if receiver_key(r) == key), None)


def _prepare(
    session: Session, settings: Settings, delivery_id: int
) -> tuple[dict[str, Any], Message, SendContext] | None:
    delivery = session.get_one(Delivery, delivery_id)
    notice = session.get_one(Notice, delivery.notice_id)
    subscription = session.get_one(Subscription, notice.subscription_id)
    receiver = current_receiver(subscription, delivery.receiver_key)
    if receiver is None or receiver.get("disabled"):
        delivery.state = "cancelled"
        delivery.lease_until = None
        delivery.last_error = "the receiver was removed or switched off"
        return None
    assert notice.payload is not None
    message = Message(notice_id(notice), notice.payload)
    return receiver, message, context_of(settings, _previous_receipt(session, notice, delivery))


def _previous_receipt(
    session: Session, notice: Notice, delivery: Delivery
) -> Mapping[str, Any] | None:
    """The newest receipt of this receiver for the same group (a GitHub issue's number)."""
    if notice.group_id is None:
        return None
    query = (
        select(Delivery.receipt)
        .join(Notice, Delivery.notice_id == Notice.id)
        .where(
            Notice.group_id == notice.group_id,
            Delivery.receiver_key == delivery.receiver_key,
            Delivery.state == "delivered",
            Delivery.id != delivery.id,
        )
        .order_by(Delivery.delivered_at.desc())
        .limit(1)
    )
    receipt = session.scalar(query)
    return receipt or None


def record(
    session: Session,
    settings: Settings,
    delivery_id: int,
    outcome: Outcome,
    now: datetime,
    lease_until: datetime,
) -> str:
    """Log the attempt and move the delivery on: delivered, retried later, or failed.

    An attempt whose lease was taken over (it outlived it, and another attempt claimed the
    delivery) is logged, and leaves the delivery to the newer attempt.
    """
    delivery = session.get_one(Delivery, delivery_id)
    error = outcome.error[:ERROR_CHARS]
    session.add(
        DeliveryAttempt(
            delivery_id=delivery.id,
            at=now,
            ok=outcome.ok,
            status=outcome.status,
            latency_ms=outcome.latency_ms,
            error=error,
        )
    )
    if delivery.state != "sending" or delivery.lease_until != lease_until:
        log.warning("delivery %s: an attempt that outlived its lease reported back", delivery_id)
        return delivery.state
    delivery.lease_until = None
    delivery.last_status = outcome.status
    delivery.last_error = error
    if outcome.ok:
        delivery.state = "delivered"
        delivery.delivered_at = now
        delivery.receipt = dict(outcome.receipt)
        if issue_url := outcome.receipt.get("issue_url"):  # a GitHub issue opened for it
            notice = session.get_one(Notice, delivery.notice_id)
            issue_sync.link_opened_issue(session, notice.group_id, str(issue_url))
    elif outcome.disable:
        delivery.state = "failed"
        switch_off(session, delivery, f"switched off on {now:%Y-%m-%d %H:%M} UTC: {error}")
    elif outcome.retry and now - delivery.created_at < timedelta(
        seconds=settings.DELIVERY_GIVE_UP_S
    ):
        delivery.state = "pending"
        wait = delay_s(delivery.attempts, settings.DELIVERY_BACKOFF_S)
        if outcome.retry_after_s is not None:  # what the receiver asked, within reason
            wait = max(wait, min(outcome.retry_after_s, MAX_DELAY_S))
        delivery.next_attempt_at = now + timedelta(seconds=wait)
    else:
        delivery.state = "failed"
    return delivery.state


def switch_off(session: Session, delivery: Delivery, reason: str) -> None:
    """A receiver that answered 410: disabled in its subscription, its waiting work cancelled.

    The subscription's revision grows, as with any change to it.
    """
    notice = session.get_one(Notice, delivery.notice_id)
    subscription = session.get_one(Subscription, notice.subscription_id)
    receivers = [
        {**r, "disabled": True, "disabled_reason": reason[:500]}
        if receiver_key(r) == delivery.receiver_key
        else r
        for r in subscription.receivers
    ]
    subscription.receivers = receivers
    subscription.revision += 1
    subscription.updated_at = utcnow()
    session.execute(
        update(Delivery)
        .where(
            Delivery.receiver_key == delivery.receiver_key,
            Delivery.state == "pending",
            Delivery.notice_id.in_(
                select(Notice.id).where(Notice.subscription_id == subscription.id)
            ),
        )
        .values(state="cancelled", last_error="the receiver was switched off (410)")
        .execution_options(synchronize_session=False)
    )
