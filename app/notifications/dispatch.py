"""The notice sweep: plan reminders, send what is due, queue the deliveries that are due.

Run by beat (or the in-process sweeper) every ``NOTIFY_SWEEP_S`` and after any transaction
that planned a notice. Each step is idempotent, so two sweeps at once, or a sweep retried
after a crash, send nothing twice:

1. reminders (``NOTIFY_REMIND_S``) and an escalation (``NOTIFY_ESCALATE_S``) for groups whose
   subscribers were told and that are still untriaged (``new``), low-severity findings aside;
2. planned notices whose time has come are rendered: a group's first and "grew" notices wait
   ``NOTIFY_GROUP_WAIT_S`` after they were planned; a digest subscription's wait for its next
   digest hour and go out together as one digest; a ``localized`` one once its subscription
   was told of the group (``localized.readiness``). Findings a silence matches are left out;
   a notice left with none is ``silenced``. A sent notice gets one delivery per receiver;
3. deliveries due (new, or a retry whose time has come, or one whose sender died and whose
   lease ran out) are queued, one task each.
"""

from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from sqlalchemy import and_, func, or_, select, union
from sqlalchemy.orm import Session

from app.anomalies.deadlines import Deadlines
from app.anomalies.models import (
    AggregateFinding,
    AlertGroup,
    CaseFailure,
    MachineSilence,
    Regression,
)
from app.core.db import utcnow
from app.core.queue import enqueue_after_commit
from app.jobs import DELIVER
from app.notifications import localized, planning
from app.notifications.matching import compile_silence
from app.notifications.message import LOCALIZED
from app.notifications.models import Delivery, Notice, Silence, Subscription
from app.notifications.planning import is_open
from app.notifications.render import Renderer
from app.notifications.service import Found, finding_of, selected_findings
from app.notifications.targets import receiver_key, receiver_target

DISPATCH_LOCK = 0x62770002  # the advisory lock class of the notice sweep ("bw", 2)
BATCH = 500  # notices rendered, and deliveries queued, per sweep
WAITING_EVENTS = ("opened", "grew")  # the events that wait for the group to settle


class Timing(Protocol):
    """The notice sweep's settings (``core.config.Settings`` has them)."""

    PUBLIC_URL: str
    NOTIFY_GROUP_WAIT_S: float
    NOTIFY_REMIND_S: float
    NOTIFY_ESCALATE_S: float
    TRIAGE_DAYS: int
    BUG_DAYS: int


@dataclass
class Swept:
    """What one sweep did."""

    planned: int = 0
    sent: int = 0
    silenced: int = 0
    queued: int = 0


def sweep(session: Session, timing: Timing, now: datetime | None = None) -> Swept:
    """One sweep (see the module's docstring); the caller commits, which queues the tasks."""
    now = now or utcnow()
    _one_at_a_time(session)
    swept = Swept()
    swept.planned = plan_reminders(session, timing, now)
    rules = Deadlines.of(timing)
    renderer = Renderer(session, timing.PUBLIC_URL, rules, now)
    silences = active_silences(session, now)
    subscriptions = {s.id: s for s in session.scalars(select(Subscription))}
    due = _due_notices(session, subscriptions, timing, now)
    for subscription_id, notices in due.items():
        subscription = subscriptions[subscription_id]
        if isinstance(subscription.when, dict):
            sent = _send_digest(session, renderer, subscription, notices, silences, now)
        else:
            sent = [n for n in notices if _send(session, renderer, subscription, n, silences, now)]
        swept.sent += len(sent)
        swept.silenced += sum(1 for n in notices if n.state == "silenced")
    session.flush()
    swept.queued = queue_due_deliveries(session, max(now, utcnow()))  # those just added too
    return swept


def _one_at_a_time(session: Session) -> None:
    """Sweeps take turns on Postgres (SQLite has one writer at a time anyway)."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(select(func.pg_advisory_xact_lock(DISPATCH_LOCK, 0)))


def plan_reminders(session: Session, timing: Timing, now: datetime) -> int:
    """Reminders and escalations for told groups that are still untriaged; how many planned.

    The k-th reminder is due ``k * NOTIFY_REMIND_S`` after the group opened (its key holds
    k, so each is planned once); the escalation once, ``NOTIFY_ESCALATE_S`` after, in place
    of the reminder of that moment. Only groups with an untriaged finding are read.

    Low-severity findings (coverage changes) neither call for nor count in a reminder: a
    model removed from a suite stays open until it returns, which may be never, and would
    otherwise remind its subscribers every day. They are told when opened and resolved.
    """
    untriaged_groups = union(
        select(Regression.group_id).where(
            Regression.status == "new", Regression.reverted.is_(False)
        ),
        select(CaseFailure.group_id).where(
            CaseFailure.status == "new",
            CaseFailure.passing_again_run_id.is_(None),
            CaseFailure.failure.not_in(CaseFailure.COVERAGE),
        ),
        select(MachineSilence.group_id).where(
            MachineSilence.status == "new", MachineSilence.ended_by_run_id.is_(None)
        ),
        select(AggregateFinding.group_id).where(
            AggregateFinding.status == "new", AggregateFinding.resolved_run_id.is_(None)
        ),
    )
    told = (
        select(Notice.subscription_id, Notice.group_id)
        .where(Notice.state.in_(("sent", "digested")), Notice.group_id.in_(untriaged_groups))
        .distinct()
    )
    pairs = [(s, g) for s, g in session.execute(told) if g is not None]
    if not pairs:
        return 0
    ids = {g for _, g in pairs}
    groups = {g.id: g for g in session.scalars(select(AlertGroup).where(AlertGroup.id.in_(ids)))}
    subscriptions = {s.id: s for s in session.scalars(select(Subscription))}
    planned = 0
    for subscription_id, group_id in sorted(pairs):
        subscription, group = subscriptions.get(subscription_id), groups.get(group_id)
        if subscription is None or subscription.paused or group is None:
            continue
        selected = selected_findings([subscription], group)
        untriaged = [
            f
            for _, chosen in selected
            for f in chosen
            if f.status == "new" and is_open(f) and not _low_severity(f)
        ]
        if untriaged:
            planned += _remind(session, timing, subscription, group, len(untriaged), now)
    return planned


def _low_severity(found: Found) -> bool:
    """A coverage change: told when it opens and ends, never reminded of."""
    return isinstance(found, CaseFailure) and found.severity == "low"


def _remind(
    session: Session,
    timing: Timing,
    subscription: Subscription,
    group: AlertGroup,
    untriaged: int,
    now: datetime,
) -> int:
    age = (now - group.created_at).total_seconds()
    escalated = 0
    if timing.NOTIFY_ESCALATE_S > 0 and age >= timing.NOTIFY_ESCALATE_S:
        escalated = planning.add(session, subscription, group.id, "escalation", untriaged)
    if timing.NOTIFY_REMIND_S <= 0 or (k := int(age // timing.NOTIFY_REMIND_S)) < 1:
        return escalated
    state = "cancelled" if escalated else "planned"  # the escalation says it already
    reminded = planning.add(session, subscription, group.id, "reminder", untriaged, str(k), state)
    return escalated + (reminded if state == "planned" else 0)


def active_silences(session: Session, now: datetime) -> list[Silence]:
    """The silences in force at ``now``."""
    query = select(Silence).where(Silence.starts_at <= now, Silence.ends_at > now)
    return list(session.scalars(query.order_by(Silence.id)))


def _due_notices(
    session: Session, subscriptions: dict[int, Subscription], timing: Timing, now: datetime
) -> dict[int, list[Notice]]:
    """Planned notices whose time has come, per subscription, oldest first."""
    settled = now - timedelta(seconds=timing.NOTIFY_GROUP_WAIT_S)
    query = (
        select(Notice)
        .where(
            Notice.state == "planned",
            or_(Notice.event.not_in(WAITING_EVENTS), Notice.created_at <= settled),
        )
        .order_by(Notice.id)
        .limit(BATCH)
    )
    due: dict[int, list[Notice]] = defaultdict(list)
    for notice in session.scalars(query):
        subscription = subscriptions.get(notice.subscription_id)
        if subscription is None or subscription.paused:
            continue
        if isinstance(subscription.when, dict) and not _digest_hour_passed(
            subscription, notice, now
        ):
            continue
        due[notice.subscription_id].append(notice)
    return due


def digest_slot(hours: Sequence[int], now: datetime) -> datetime:
    """The latest digest hour at or before ``now`` (UTC, on the hour)."""
    today = now.replace(minute=0, second=0, microsecond=0)
    for back in range(0, 25):
        slot = today - timedelta(hours=back)
        if slot.hour in hours:
            return slot
    raise ValueError("a digest needs at least one hour")


def _digest_hour_passed(subscription: Subscription, notice: Notice, now: datetime) -> bool:
    return notice.created_at <= digest_slot(subscription.when["digest_hours"], now)


def _chosen(
    subscription: Subscription, group: AlertGroup, silences: Sequence[Silence]
) -> list[Found]:
    """The group's findings the subscription selects, less those a silence holds back."""
    selected = [f for _, chosen in selected_findings([subscription], group) for f in chosen]
    mutes = [compile_silence(s.matchers) for s in silences]
    return [f for f in selected if not any(mute.matches(finding_of(f)) for mute in mutes)]


def _send(
    session: Session,
    renderer: Renderer,
    subscription: Subscription,
    notice: Notice,
    silences: Sequence[Silence],
    now: datetime,
) -> bool:
    """Render one notice and give it its deliveries; False when silenced (or emptied)."""
    assert notice.group_id is not None
    group = session.get_one(AlertGroup, notice.group_id)
    chosen = _chosen(subscription, group, silences)
    told = None
    if notice.event == LOCALIZED:
        if (part := _localized(session, renderer, subscription, notice, chosen, now)) is None:
            return False
        chosen, told = part
    if not chosen:
        notice.state = "silenced"
        return False
    notice.revision = subscription.revision
    notice.sent_at = now
    notice.findings = len(chosen)
    notice.payload = renderer.notice(notice, subscription, chosen, told)
    notice.state = "sent"
    add_deliveries(session, subscription, notice)
    return True


def _localized(
    session: Session,
    renderer: Renderer,
    subscription: Subscription,
    notice: Notice,
    chosen: Sequence[Found],
    now: datetime,
    carried: Collection[int | None] = (),
) -> tuple[list[Found], dict[str, Any]] | None:
    """A ``localized`` notice's finding (if still chosen) and localization; None: not now.

    Not now: it waits (still planned) for the notice that tells its subscription of the
    group, or is cancelled when none will (``localized.readiness``).
    """
    ready, found = localized.readiness(session, notice, now, carried)
    if ready != "send" or found is None:
        if ready == "cancel":
            notice.state = "cancelled"
        return None
    told = localized.localization_of(found, subscription.mention_author, renderer.base)
    return localized.its_finding(found, chosen), told


def _send_digest(
    session: Session,
    renderer: Renderer,
    subscription: Subscription,
    notices: Sequence[Notice],
    silences: Sequence[Silence],
    now: datetime,
) -> list[Notice]:
    """The due notices of a digest subscription as one digest notice (if any is left)."""
    sections: list[tuple[AlertGroup, Sequence[Found], str, dict[str, Any] | None]] = []
    carried = []
    groups = {n.group_id for n in notices if n.event != LOCALIZED}  # told in this digest
    for notice in notices:
        assert notice.group_id is not None
        group = session.get_one(AlertGroup, notice.group_id)
        chosen = _chosen(subscription, group, silences)
        told = None
        if notice.event == LOCALIZED:
            part = _localized(session, renderer, subscription, notice, chosen, now, groups)
            if part is None:
                continue
            chosen, told = part
        if not chosen:
            notice.state = "silenced"
            continue
        notice.findings = len(chosen)
        sections.append((group, chosen, notice.event, told))
        carried.append(notice)
    if not carried:
        return []
    slot = digest_slot(subscription.when["digest_hours"], now)
    digest = Notice(
        subscription_id=subscription.id,
        revision=subscription.revision,
        group_id=None,
        event="digest",
        event_key=f"digest:{slot:%Y-%m-%dT%H}",
        state="sent",
        findings=sum(len(c) for _, c, _, _ in sections),
        created_at=now,
        sent_at=now,
    )
    taken = session.scalar(
        select(Notice.id).where(
            Notice.subscription_id == subscription.id, Notice.event_key == digest.event_key
        )
    )
    if taken is not None:
        return []  # this hour's digest went out: the late ones wait for the next
    session.add(digest)
    session.flush()
    digest.payload = renderer.digest(digest, subscription, sections)
    for notice in carried:
        notice.state = "digested"
        notice.digest_id = digest.id
        notice.sent_at = now
        notice.revision = subscription.revision
    add_deliveries(session, subscription, digest)
    return [digest]


def add_deliveries(session: Session, subscription: Subscription, notice: Notice) -> int:
    """One delivery of ``notice`` per switched-on receiver, due now; how many.

    A feed's is delivered as it is written (the feed lists it from now on): no task.
    """
    now = utcnow()
    added = 0
    for receiver in subscription.receivers:
        if receiver.get("disabled"):
            continue
        in_feed = receiver["kind"] == "feed"
        session.add(
            Delivery(
                notice_id=notice.id,
                receiver_key=receiver_key(receiver),
                kind=receiver["kind"],
                target=receiver_target(receiver),
                state="delivered" if in_feed else "pending",
                attempts=0,
                next_attempt_at=now,
                delivered_at=now if in_feed else None,
                last_error="",
                receipt={},
                created_at=now,
            )
        )
        added += 1
    return added


def queue_due_deliveries(session: Session, now: datetime) -> int:
    """Queue a task for each delivery due now (after the commit); how many."""
    due = select(Delivery.id).where(
        or_(
            and_(Delivery.state == "pending", Delivery.next_attempt_at <= now),
            and_(Delivery.state == "sending", Delivery.lease_until < now),
        )
    )
    ids = list(session.scalars(due.order_by(Delivery.next_attempt_at, Delivery.id).limit(BATCH)))
    for delivery_id in ids:
        enqueue_after_commit(session, DELIVER, delivery_id=delivery_id)
    return len(ids)
