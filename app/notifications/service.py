"""Subscriptions: create, read, change, delete; and which of them an alert group concerns."""

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, object_session

from app.anomalies.models import (
    AggregateFinding,
    AlertGroup,
    CaseFailure,
    MachineSilence,
    Regression,
)
from app.audit import service as audit
from app.core.db import utcnow
from app.core.errors import Conflict, InvalidInput, NotFound
from app.core.pagination import count_and_page
from app.notifications import guard
from app.notifications.matching import Finding, compile_subscription
from app.notifications.models import Delivery, Notice, Subscription
from app.notifications.receivers.registry import BY_NAME
from app.notifications.silences import scoped
from app.notifications.targets import feed_token, stored, token_hash, with_credentials
from app.runs.models import Run
from app.tokens.models import ApiToken

TargetCheck = Callable[[Sequence[Mapping[str, Any]]], None]  # raises InvalidInput
FIELDS = ("name", "owner", "match", "exclude", "receivers", "when", "paused", "mention_author")


def _of_project(match: Mapping[str, Any], project: str) -> bool:
    """Whether a subscription's rules select the findings of ``project`` alone.

    A subscription has no project of its own: its ``match.project`` says whose findings it
    receives, and one of a project's tokens sees only those that name that project alone.
    """
    return match.get("project") == [project]


def list_subscriptions(
    session: Session, offset: int, limit: int, token: ApiToken | None = None
) -> tuple[list[Subscription], int]:
    """A page of subscriptions by name, and how many there are.

    A ``token`` limited to a project sees its project's subscriptions only (``_of_project``).
    """
    order = (Subscription.name, Subscription.id)
    if token is None or token.project is None:
        return count_and_page(session, select(Subscription), order, offset, limit)
    project = token.project
    # Rules are JSON, matched alike on SQLite and Postgres here: subscriptions are few
    # (admins make them), and only their ids and rules are read for the count.
    ids = [
        row.id
        for row in session.execute(select(Subscription.id, Subscription.match).order_by(*order))
        if _of_project(row.match or {}, project)
    ]
    shown = ids[offset : offset + limit]
    found = {
        s.id: s for s in session.scalars(select(Subscription).where(Subscription.id.in_(shown)))
    }
    return [found[i] for i in shown if i in found], len(ids)


def get_subscription(
    session: Session, subscription_id: int, token: ApiToken | None = None
) -> Subscription:
    """One subscription; NotFound if there is none with this id, or ``token`` may not see it.

    Another project's subscription is answered as absent to a project's token (as a
    disabled feed is): its existence and name are that project's business.
    """
    subscription = session.get(Subscription, subscription_id)
    if subscription is None or (
        token is not None
        and token.project is not None
        and not _of_project(subscription.match or {}, token.project)
    ):
        raise NotFound(f"no subscription {subscription_id}")
    return subscription


def subscription_of_delivery(
    session: Session, delivery_id: int, token: ApiToken | None = None
) -> int:
    """The id of the subscription whose notice a delivery carries.

    Raises:
        NotFound: no such delivery, or ``token`` may not see its subscription.
    """
    found = session.scalar(
        select(Notice.subscription_id)
        .join(Delivery, Delivery.notice_id == Notice.id)
        .where(Delivery.id == delivery_id)
    )
    if found is None:
        raise NotFound(f"no delivery {delivery_id}")
    try:
        get_subscription(session, found, token)
    except NotFound:
        raise NotFound(f"no delivery {delivery_id}") from None
    return found


def _scoped_match(token: ApiToken | None, values: Mapping[str, Any]) -> Mapping[str, Any]:
    """``values`` with the match a token may subscribe with (``silences.scoped``'s rule)."""
    if token is None or "match" not in values:
        return values
    return {**values, "match": scoped(token, values["match"] or {}, "body.match.project")}


def _name_taken(name: str) -> Conflict:
    return Conflict(
        f"a subscription named {name!r} exists already",
        errors=[{"loc": "name", "field": "name", "message": "taken by another subscription"}],
    )


def _check_name_free(session: Session, name: str, subscription_id: int | None = None) -> None:
    query = select(Subscription.id).where(Subscription.name == name)
    if subscription_id is not None:
        query = query.where(Subscription.id != subscription_id)
    if session.scalar(query) is not None:
        raise _name_taken(name)


def _check_feed_free(
    session: Session,
    receivers: Sequence[Mapping[str, Any]],
    subscription_id: int | None = None,
    kept: str | None = None,
) -> str | None:
    """The hash of the receivers' feed token, unless another subscription's feed has it.

    A feed given without a token (``with_credentials`` left the one it had alone) keeps
    ``kept``, the hash stored before; no feed, none.
    """
    token = feed_token(receivers)
    if token is None:
        return kept if any(r["kind"] == "feed" for r in receivers) else None
    token = token_hash(token)  # the column holds the hash (migration b2d4f6a80026)
    query = select(Subscription.id).where(Subscription.feed_token == token)
    if subscription_id is not None:
        query = query.where(Subscription.id != subscription_id)
    with session.no_autoflush:
        taken = session.scalar(query) is not None
    if taken:
        at = next(i for i, r in enumerate(receivers) if r["kind"] == "feed")
        raise Conflict(
            "another subscription's feed has this token: leave it out to get a new one",
            errors=[{"loc": f"receivers[{at}].token", "field": "token", "message": "taken"}],
        )
    return token


def _flush(session: Session, name: str) -> None:
    """Write the change; a name another transaction took meanwhile is a Conflict too."""
    try:
        session.flush()
    except IntegrityError as exc:
        raise _name_taken(name) from exc


def _audited(subscription: Subscription) -> dict[str, Any]:
    """What the audit log keeps of a subscription: its fields, its receivers' kinds only."""
    kept = audit.fields(subscription, [f for f in FIELDS if f != "receivers"])
    return {**kept, "receivers": [r.get("kind", "") for r in subscription.receivers]}


def _actor(by: str, source: str) -> str:
    return by or ("the subscriptions file" if source == "file" else source)


def create_subscription(
    session: Session,
    values: Mapping[str, Any],
    targets: TargetCheck,
    source: str = "api",
    by: str = "",
    token: ApiToken | None = None,
) -> Subscription:
    """A new subscription at revision 1 from validated values (``schemas.SubscriptionCreate``).

    Webhooks without secrets get one, feeds their token; ``targets`` checks where each
    receiver sends (``check_receivers``). A ``token`` limited to a project subscribes to its
    project's findings only: its project is added to a match that names none.

    Raises:
        Conflict: another subscription has the name, or its feed the token.
        InvalidInput: a receiver sends where it may not.
        ProjectNotAllowed: the match names another project than the token's.
    """
    values = {"match": {}, "mention_author": False, **values}
    values = _scoped_match(token, values)
    _check_name_free(session, values["name"])
    receivers = with_credentials(values["receivers"])
    targets(receivers)
    now = utcnow()
    fields = {**{field: values[field] for field in FIELDS}, "receivers": stored(receivers)}
    subscription = Subscription(
        **fields,
        revision=1,
        source=source,
        feed_token=_check_feed_free(session, receivers),
        created_at=now,
        updated_at=now,
    )
    subscription.made_feed_token = feed_token(receivers)
    session.add(subscription)
    _flush(session, subscription.name)
    target = f"subscription:{subscription.id}"
    audit.record(
        session, _actor(by, source), "subscription.create", target, {}, _audited(subscription)
    )
    return subscription


def update_subscription(
    session: Session,
    subscription_id: int,
    changes: Mapping[str, Any],
    targets: TargetCheck,
    source: str = "api",
    by: str = "",
    token: ApiToken | None = None,
) -> Subscription:
    """Set the given fields; the revision grows by one when any stored value changes.

    Args:
        session: the session to change it in (the caller commits).
        subscription_id: which subscription.
        changes: field to new value (validated; a field absent stays as it is).
        targets: checks where the receivers send (``check_receivers``).
        source: who changes it: ``api``, or ``file`` (the subscriptions file).
        by: who, for the audit log (the token and session; empty: ``source``).
        token: who asks; one limited to a project changes its project's subscriptions only.

    Raises:
        NotFound: no subscription has this id (that ``token`` may see).
        ProjectNotAllowed: a new match names another project than the token's.
        Conflict: another subscription has the new name, or the subscriptions file owns it.
        InvalidInput: a receiver sends where it may not.
    """
    subscription = get_subscription(session, subscription_id, token)
    _check_owned_by(subscription, source)
    changes = _scoped_match(token, changes)
    before = _audited(subscription)
    feed_changed = False
    subscription.made_feed_token = None
    if "receivers" in changes:
        receivers = with_credentials(changes["receivers"], subscription.receivers)
        targets(receivers)
        changes = {**changes, "receivers": stored(receivers)}
        digest = _check_feed_free(session, receivers, subscription.id, subscription.feed_token)
        feed_changed = digest != subscription.feed_token
        subscription.feed_token = digest
        subscription.made_feed_token = feed_token(receivers)
    changed = {f: v for f, v in changes.items() if f in FIELDS and getattr(subscription, f) != v}
    if not changed and not feed_changed:  # a new feed token is a new revision too
        return subscription
    if "name" in changed:
        _check_name_free(session, changed["name"], subscription.id)
    for field, value in changed.items():
        setattr(subscription, field, value)
    subscription.revision += 1
    subscription.updated_at = utcnow()
    _flush(session, subscription.name)
    target = f"subscription:{subscription.id}"
    after = {**_audited(subscription), "revision": subscription.revision}
    before["revision"] = subscription.revision - 1
    audit.record(session, _actor(by, source), "subscription.update", target, before, after)
    return subscription


def delete_subscription(
    session: Session,
    subscription_id: int,
    source: str = "api",
    by: str = "",
    token: ApiToken | None = None,
) -> None:
    """Delete a subscription and its notices.

    Raises:
        NotFound: no subscription has this id (that ``token`` may see).
        Conflict: the subscriptions file owns it.
    """
    subscription = get_subscription(session, subscription_id, token)
    _check_owned_by(subscription, source)
    target = f"subscription:{subscription.id}"
    before = _audited(subscription)
    audit.record(session, _actor(by, source), "subscription.delete", target, before, {})
    session.delete(subscription)
    session.flush()


def _check_owned_by(subscription: Subscription, source: str) -> None:
    if subscription.source == "file" and source != "file":
        raise Conflict(
            f"subscription {subscription.name!r} comes from the subscriptions file "
            "(BENCHWATCH_SUBSCRIPTIONS_FILE): change it there"
        )


def check_receivers(allow: str, apprise_schemes: str) -> TargetCheck:
    """A check of receivers: each URL passes the SSRF guard, each Apprise URL its scheme list.

    Each receiver is checked by its kind (``ReceiverKind.check``), its errors at its ``url``.

    Run when a subscription is made or its receivers change, and again at every delivery
    (a name can change what it points to). A name that does not resolve yet passes here.
    """
    allowed = guard.AllowList.parse(allow)

    def check(receivers: Sequence[Mapping[str, Any]]) -> None:
        errors = []
        for index, receiver in enumerate(receivers):
            try:
                BY_NAME[receiver["kind"]].check(receiver, allowed, apprise_schemes)
            except ValueError as exc:
                errors.append(
                    {"loc": f"receivers[{index}].url", "field": "url", "message": str(exc)}
                )
        if errors:
            raise InvalidInput("a receiver sends where it may not", errors=errors)

    return check


def accept_any(_: Sequence[Mapping[str, Any]]) -> None:
    """No check of receivers (tests of what does not depend on where they send)."""


# A finding of an alert group, as stored.
Found = Regression | CaseFailure | MachineSilence | AggregateFinding


def findings_of(group: AlertGroup) -> list[Found]:
    """Every finding of a group: a silence, its failures, its aggregates, then its steps."""
    return [*group.silences, *group.failures, *group.aggregates, *group.regressions]


def finding_of(found: Found) -> Finding:
    """A stored finding as subscription rules see it.

    A step that helps is an ``improvement`` finding; one that hurts, or one of a metric
    with no good direction (``direction`` ``change``), is a ``regression`` finding. A case
    that started failing is a ``failure``, a machine that stopped reporting is
    ``machine_silent``: both a change larger than any ``min_rel_change``. A case no longer
    reported, or newly reported, is a ``coverage`` finding (of low severity: a subscription
    that asks for ``failure`` is not told of it); one no longer reported is a ``regression``
    (a model can vanish because it crashed before writing anything), a new one a ``change``.
    A dashboard aggregate that got worse is an ``aggregate`` whose ``metric`` names the
    aggregate. A shape change is a ``noise`` or ``bimodal`` finding, whose ``direction`` is
    ``regression`` (a series that scatters more, or splits, got worse) and whose
    ``rel_change`` is its spread's. A finding's ``project`` is its series' (a step) or its
    first bad run's (a failure, an aggregate); a machine's silence has none.
    """
    if isinstance(found, MachineSilence):
        return Finding(
            kind="machine_silent",
            machine=found.machine.name,
            channel=found.channel,
            direction="regression",
            rel_change=math.inf,
        )
    if isinstance(found, AggregateFinding):
        return Finding(
            kind="aggregate",
            machine=found.machine.name,
            channel=found.channel,
            suite=found.suite,
            config=found.config,
            precision=found.precision,
            mode=found.mode,
            metric=found.stat,
            direction="regression",
            rel_change=found.rel_change,
            project=_project_of(found, found.first_bad_run_id),
        )
    if isinstance(found, CaseFailure):
        benchmark = found.benchmark
        coverage = found.failure in CaseFailure.COVERAGE
        return Finding(
            kind="coverage" if coverage else "failure",
            machine=found.machine.name,
            channel=found.channel,
            suite=benchmark.suite,
            model=benchmark.model,
            category=benchmark.category,
            config=benchmark.config,
            precision=benchmark.precision,
            mode=benchmark.mode,
            metric=found.metric,
            direction="change" if found.failure == "added" else "regression",
            rel_change=math.inf,
            project=_project_of(found, found.first_failing_run_id),
        )
    series = found.series
    benchmark = series.benchmark
    return Finding(
        kind=found.kind,
        machine=series.machine.name,
        channel=series.channel,
        project=series.project,
        suite=benchmark.suite,
        model=benchmark.model,
        category=benchmark.category,
        config=benchmark.config,
        precision=benchmark.precision,
        mode=benchmark.mode,
        metric=series.metric.name,
        direction="regression" if found.is_shape else found.direction,
        rel_change=found.rel_change,
        state="confirmed" if found.state == "confirmed" else "suspected",
    )


def _project_of(found: Found, run_id: int) -> str:
    """The project of a finding's run; empty for a finding in no session.

    ``session.get``: a run the session holds already (a group's runs) is not read again.
    """
    session = object_session(found)
    run = session.get(Run, run_id) if session is not None else None
    return run.project if run is not None else ""


def matching_subscriptions(
    session: Session, group: AlertGroup
) -> list[tuple[Subscription, list[Found]]]:
    """The unpaused subscriptions that select findings of ``group``, each with those findings.

    In the order of the subscriptions' ids; a subscription that selects none is left out.
    """
    subscriptions = session.scalars(
        select(Subscription).where(Subscription.paused.is_(False)).order_by(Subscription.id)
    )
    return selected_findings(subscriptions, group)


def selected_findings(
    subscriptions: Iterable[Subscription], group: AlertGroup
) -> list[tuple[Subscription, list[Found]]]:
    """Each of ``subscriptions`` that selects findings of ``group``, with those findings."""
    findings = [(finding_of(found), found) for found in findings_of(group)]
    selected = []
    for subscription in subscriptions:
        matcher = compile_subscription(subscription.match, subscription.exclude)
        chosen = [regression for finding, regression in findings if matcher.matches(finding)]
        if chosen:
            selected.append((subscription, chosen))
    return selected
