"""Which notices an alert group's change calls for, written in the transaction that changed it.

Detection adds findings to groups (steps, failing cases); it reverts earlier steps and sees
failing cases pass again; triage fixes them. Whatever
path did it, a listener notes the groups whose findings were added or changed, and just
before that transaction commits it plans their notices (``Notice`` rows, the outbox), so a
detection that rolls back leaves no notice and one that commits cannot lose its notices.

Per group and subscription that selects some of its findings (Alertmanager's alert groups):

- ``opened``: the first notice, sent after the group wait (``dispatch``), so a bad nightly's
  findings arrive together;
- ``grew``: the group now holds more selected findings than the last notice told of (one
  still waiting tells the newer state anyway, so nothing new is planned then);
- ``confirmed``: a suspected step the subscription was told of is now confirmed, and no
  ``grew`` says so already (the count of findings did not change, so nothing else would);
  once per set of steps confirmed together;
- ``resolved``: no selected finding is left open (each is fixed, expected, invalid,
  reverted, passing or reporting again, or a recovered aggregate); once, and only to
  subscribers that were told of the group (waiting notices are cancelled instead);
- ``localized``: a localization of one of the group's findings finished (culprit found, not
  reproduced, inconclusive, failed), in the transaction that finished it; once per
  localization (``g7:localized:5``: a finish delivered again plans nothing new), to each
  subscription that selects that very finding and was told of the group, or is about to be
  (a notice of it sent, in a digest, or planned). The one who was paged for a step hears
  what caused it, whatever the finding's triage since; a subscription that never heard of
  the group (its rules select other findings, it was made later, its notices were silenced
  or cancelled) is not told of a search it never knew was running. Sent after the notice
  that tells the group (``localized.readiness``), never before it.

Reminders and escalations are planned by the sweep (``dispatch``), which knows the time.
A notice's ``event_key`` is unique per subscription, so planning the same event twice (a
retried detection) writes it once.
"""

import hashlib
from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence
from typing import Any

from sqlalchemy import event, inspect, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import InstanceState, Session

from app.anomalies.models import (
    AggregateFinding,
    AlertGroup,
    CaseFailure,
    MachineSilence,
    Regression,
)
from app.core.db import utcnow
from app.core.queue import enqueue_after_commit
from app.jobs import DISPATCH_NOTICES
from app.localization.models import UNFINISHED, Localization
from app.notifications.localized import TOLD, its_finding
from app.notifications.message import LOCALIZED
from app.notifications.models import Notice, Subscription
from app.notifications.service import Found, selected_findings

TOUCHED = "benchwatch.touched_groups"
CONFIRMED = "benchwatch.confirmed_steps"  # ids of steps that went suspected -> confirmed
FINISHED = "benchwatch.finished_localizations"  # ids of localizations this transaction ended
KEY_CHARS = 64  # ``Notice.event_key``
OPEN_STATUSES = ("new", "acknowledged")


def is_open(found: Found) -> bool:
    """Still to be acted on: not triaged away, reverted, passing, reporting again, recovered."""
    if found.status not in OPEN_STATUSES:
        return False
    if isinstance(found, AggregateFinding):
        return found.resolved_run_id is None
    if isinstance(found, CaseFailure):
        return found.passing_again_run_id is None
    if isinstance(found, MachineSilence):
        return found.ended_by_run_id is None
    return not found.reverted


# What, changed on a finding, can change what its group's subscribers are told.
WATCHED: dict[type, tuple[str, ...]] = {
    Regression: ("status", "reverted", "state"),
    CaseFailure: ("status", "passing_again_run_id"),
    MachineSilence: ("status", "ended_by_run_id"),
    AggregateFinding: ("status", "resolved_run_id"),
}
FINDINGS = (Regression, CaseFailure, MachineSilence, AggregateFinding)


def _note_touched_groups(session: Session, _context: Any, _instances: Any) -> None:
    """Remember the groups whose findings are added, re-triaged, reverted or passing again."""
    touched: set[AlertGroup] = session.info.setdefault(TOUCHED, set())
    for found in session.new:
        if isinstance(found, FINDINGS) and found.group is not None:
            touched.add(found.group)
    confirmed: set[int] = session.info.setdefault(CONFIRMED, set())
    for found in session.dirty:
        if isinstance(found, FINDINGS) and _changed(found):
            touched.add(found.group)
            if isinstance(found, Regression) and _was_confirmed(found):
                confirmed.add(found.id)
    finished: set[int] = session.info.setdefault(FINISHED, set())
    for found in session.dirty:
        if isinstance(found, Localization) and _was_finished(found):
            finished.add(found.id)


def _was_finished(localization: Localization) -> bool:
    """Queued or running before this change, finished by it (``lifecycle.finish``)."""
    history = inspect(localization).attrs["state"].history
    before = history.deleted or ()
    return localization.state not in UNFINISHED and any(s in UNFINISHED for s in before)


def _was_confirmed(regression: Regression) -> bool:
    history = inspect(regression).attrs["state"].history
    return regression.state == "confirmed" and "suspected" in (history.deleted or ())


def _changed(found: Found) -> bool:
    state: InstanceState[Found] = inspect(found)
    return any(state.attrs[name].history.has_changes() for name in WATCHED[type(found)])


def _plan_before_commit(session: Session) -> None:
    # Commit flushes only after this hook: flush first, or changes made since the last flush
    # (the groups' ids, their last changes) would go unnoted and unplanned.
    session.flush()
    groups = session.info.pop(TOUCHED, set())
    confirmed = session.info.pop(CONFIRMED, set())
    finished = session.info.pop(FINISHED, set())
    planned = plan(session, groups, confirmed) if groups else 0
    planned += plan_localized(session, finished) if finished else 0
    if planned:
        enqueue_after_commit(session, DISPATCH_NOTICES)


def _forget_touched(session: Session, previous: Any) -> None:
    if previous.nested:  # a savepoint's rollback: the groups touched before it still count
        return
    for key in (TOUCHED, CONFIRMED, FINISHED):
        session.info.pop(key, None)


LISTENERS = (
    ("before_flush", _note_touched_groups),
    ("before_commit", _plan_before_commit),
    ("after_soft_rollback", _forget_touched),
)


def install() -> None:
    """Plan notices in every session's transaction from now on (once per process is enough).

    ``app.runtime.install_listeners`` calls it as a process starts: a process that wrote
    findings without it would tell nobody.
    """
    for name, listener in LISTENERS:
        if not event.contains(Session, name, listener):
            event.listen(Session, name, listener)


def plan(session: Session, groups: Iterable[AlertGroup], confirmed: Collection[int] = ()) -> int:
    """Plan the notices the current state of ``groups`` calls for; how many were written.

    ``confirmed``: the ids of the steps this transaction confirmed (suspected before).
    """
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
            written += _plan_one(
                session, subscription, group, chosen, known[subscription.id], confirmed
            )
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
    chosen: Sequence[Found],
    notices: Sequence[Notice],
    confirmed: Collection[int] = (),
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
    if waiting:
        return 0  # it is rendered when sent, so it tells the steps as confirmed
    if len(chosen) > max(n.findings for n in notices):
        return add(session, subscription, group.id, "grew", len(chosen), suffix=str(len(chosen)))
    steps = sorted(f.id for f in still_open if isinstance(f, Regression) and f.id in confirmed)
    if not steps or not told:
        return 0
    return add(session, subscription, group.id, "confirmed", len(chosen), suffix=_ids(steps))


def plan_localized(session: Session, localization_ids: Collection[int]) -> int:
    """Plan the ``localized`` notices of these finished localizations; how many were written.

    Per localization of a group: each unpaused subscription that selects its finding and was
    told of the group, or has a notice of it planned (the module's rule).
    """
    localizations = list(
        session.scalars(
            select(Localization)
            .where(Localization.id.in_(localization_ids), Localization.group_id.is_not(None))
            .order_by(Localization.id)
        )
    )
    if not localizations:
        return 0
    subscriptions = list(
        session.scalars(
            select(Subscription).where(Subscription.paused.is_(False)).order_by(Subscription.id)
        )
    )
    written = 0
    for localization in localizations:
        group = session.get(AlertGroup, localization.group_id)
        if group is None or localization.state in UNFINISHED:
            continue
        known = _notices_by_subscription(session, group.id)
        for subscription, chosen in selected_findings(subscriptions, group):
            notices = [n for n in known[subscription.id] if n.event != LOCALIZED]
            told = any(n.state in TOLD or n.state == "planned" for n in notices)
            if told and its_finding(localization, chosen):
                written += add(
                    session,
                    subscription,
                    group.id,
                    LOCALIZED,
                    1,
                    suffix=str(localization.id),
                    localization_id=localization.id,
                )
    return written


def _ids(ids: Sequence[int]) -> str:
    """Ids as a key's suffix: listed while they fit ``KEY_CHARS``, else their digest."""
    listed = ",".join(map(str, ids))
    if len(listed) <= KEY_CHARS - len("g:confirmed:") - 20:  # 20: a group id's most digits
        return listed
    return "h" + hashlib.sha256(listed.encode()).hexdigest()[:24]


def add(
    session: Session,
    subscription: Subscription,
    group_id: int | None,
    event_name: str,
    findings: int,
    suffix: str = "",
    state: str = "planned",
    localization_id: int | None = None,
) -> int:
    """Write a notice (planned, unless told otherwise) unless its event is written already.

    Returns 1 if it was written, else 0. ``localization_id``: a ``localized`` notice's.

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
        "localization_id": localization_id,
    }
    dialect = postgresql if session.get_bind().dialect.name == "postgresql" else sqlite
    insert = dialect.insert(Notice).values(values).on_conflict_do_nothing().returning(Notice.id)
    # The returned rows, not ``rowcount``: psycopg may report -1 for this statement.
    return len(session.execute(insert).all())
