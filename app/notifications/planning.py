"""Which notices an alert group's change calls for, written in the transaction that changed it.

Detection adds regressions to groups; it reverts earlier ones; triage fixes them. Whatever
path did it, a listener notes the groups whose regressions were added or changed, and just
before that transaction commits it plans their notices (``Notice`` rows, the outbox), so a
detection that rolls back leaves no notice and one that commits cannot lose its notices.

Per group and subscription that selects some of its findings (Alertmanager's alert groups):

- ``opened``: the first notice, sent after the group wait (``dispatch``), so a bad nightly's
  findings arrive together;
- ``grew``: the group now holds more selected findings than the last notice told of (one
  still waiting tells the newer state anyway, so nothing new is planned then);
- ``resolved``: no selected finding is left open (each is fixed, expected, invalid or
  reverted); once, and only to subscribers that were told of the group (waiting notices are
  cancelled instead).

Reminders and escalations are planned by the sweep (``dispatch``), which knows the time.
A notice's ``event_key`` is unique per subscription, so planning the same event twice (a
retried detection) writes it once.
"""

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import event, inspect, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from app.anomalies.models import AlertGroup, Regression
from app.core.db import utcnow
from app.core.queue import enqueue_after_commit
from app.jobs import DISPATCH_NOTICES
from app.notifications.models import Notice, Subscription
from app.notifications.service import selected_findings

TOUCHED = "benchwatch.touched_groups"
OPEN_STATUSES = ("new", "acknowledged")


def is_open(regression: Regression) -> bool:
    """Still to be acted on: neither triaged away (fixed, expected, invalid) nor reverted."""
    return regression.status in OPEN_STATUSES and not regression.reverted


@event.listens_for(Session, "before_flush")
def _note_touched_groups(session: Session, _context: Any, _instances: Any) -> None:
    """Remember the groups whose regressions are added, re-triaged or reverted."""
    touched: set[AlertGroup] = session.info.setdefault(TOUCHED, set())
    for regression in session.new:
        if isinstance(regression, Regression) and regression.group is not None:
            touched.add(regression.group)
    for regression in session.dirty:
        if isinstance(regression, Regression) and _status_changed(regression):
            touched.add(regression.group)


def _status_changed(regression: Regression) -> bool:
    state = inspect(regression)
    return any(state.attrs[name].history.has_changes() for name in ("status", "reverted"))


@event.listens_for(Session, "before_commit")
def _plan_before_commit(session: Session) -> None:
    if not session.info.get(TOUCHED):
        return
    session.flush()  # the groups' ids, and their last changes noted
    groups = session.info.pop(TOUCHED, set())
    if plan(session, groups):
        enqueue_after_commit(session, DISPATCH_NOTICES)


@event.listens_for(Session, "after_soft_rollback")
def _forget_touched(session: Session, _previous: Any) -> None:
    session.info.pop(TOUCHED, None)


def plan(session: Session, groups: Iterable[AlertGroup]) -> int:
    """Plan the notices the current state of ``groups`` calls for; how many were written."""
    groups = sorted(groups, key=lambda g: g.id)
    if not groups:
        return 0
    subscriptions = list(
        session.scalars(
            select(Subscription).where(Subscription.paused.is_(False)).order_by(Subscription.id)
        )
    )
    if not subscriptions:
        return 0
    written = 0
    for group in groups:
        known = _notices_by_subscription(session, group.id)
        for subscription, chosen in selected_findings(subscriptions, group):
            written += _plan_one(session, subscription, group, chosen, known[subscription.id])
    return written


def _notices_by_subscription(session: Session, group_id: int) -> dict[int, list[Notice]]:
    found: dict[int, list[Notice]] = defaultdict(list)
    for notice in session.scalars(select(Notice).where(Notice.group_id == group_id)):
        found[notice.subscription_id].append(notice)
    return found


def _plan_one(
    session: Session,
    subscription: Subscription,
    group: AlertGroup,
    chosen: Sequence[Regression],
    notices: Sequence[Notice],
) -> int:
    still_open = [r for r in chosen if is_open(r)]
    waiting = [n for n in notices if n.state == "planned" and n.event in ("opened", "grew")]
    told = [n for n in notices if n.state in ("sent", "digested")]
    if not notices:
        return add(session, subscription, group.id, "opened", len(chosen)) if still_open else 0
    if not still_open:
        for notice in waiting:
            notice.state = "cancelled"
        return add(session, subscription, group.id, "resolved", len(chosen)) if told else 0
    if waiting or len(chosen) <= max(n.findings for n in notices):
        return 0
    return add(session, subscription, group.id, "grew", len(chosen), suffix=str(len(chosen)))


def add(
    session: Session,
    subscription: Subscription,
    group_id: int | None,
    event_name: str,
    findings: int,
    suffix: str = "",
    state: str = "planned",
) -> int:
    """Write a notice (planned, unless told otherwise) unless its event is written already.

    Returns 1 if it was written, else 0.

    ``INSERT ... ON CONFLICT DO NOTHING``: a concurrent transaction that plans the same event
    neither fails nor duplicates it.
    """
    key = f"g{group_id}:{event_name}" + (f":{suffix}" if suffix else "")
    values = {
        "subscription_id": subscription.id,
        "revision": subscription.revision,
        "group_id": group_id,
        "event": event_name,
        "event_key": key,
        "state": state,
        "findings": findings,
        "created_at": utcnow(),
    }
    dialect = postgresql if session.get_bind().dialect.name == "postgresql" else sqlite
    insert = dialect.insert(Notice).values(values).on_conflict_do_nothing()
    written = session.execute(insert).rowcount  # type: ignore[attr-defined]
    return int(written or 0)
