"""The subscriptions and silences pages: what they show and what their forms do.

Subscriptions are for a signed-in session whose token holds ``admin`` (their webhook secrets
and feed URLs are on the page); silences are read by every reader and made or ended with
``triage`` (who may: ``app.dashboard.access``). Rules and receivers are edited as JSON, checked
by the API's own schemas; a refused form comes back as typed, each problem with its location.
"""

import json
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import Depends, Form
from pydantic import ValidationError
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.db import utcnow
from app.core.errors import DomainError, NotFound, describe
from app.notifications import outbox, service, silences, targets
from app.notifications.models import Delivery, DeliveryAttempt, Notice, Subscription
from app.notifications.schemas import MAX_SILENCE, SilenceCreate, SubscriptionCreate
from app.notifications.targets import receiver_target
from app.tokens.models import ApiToken

SUBSCRIPTIONS_SHOWN = 500
NOTICES_SHOWN = 20  # the delivery log: the newest notices of a subscription
EXPIRED_SHOWN = 10  # the silences that ended last
SILENCES_SHOWN = 200  # of those active, and of those pending
FOLLOW_RELOADS = 30  # a page reloads each second, at most this often, until a send is done
DUE_SOON = timedelta(seconds=5)  # a pending delivery due later waits for a retry: not followed
CREDENTIALS = ("secrets", "token")  # kept when left out of a change, so not in the form
DEFAULTS = {"disabled": False, "disabled_reason": ""}  # of every receiver: left out of the form
JSON_TEXT = 20_000  # characters a JSON field of a form may hold
FormErrors = list[dict[str, str]]  # {"top": form field, "loc": where in it, "message"}


def receiver_check(settings: Settings) -> service.TargetCheck:
    """Where receivers may send, as the API checks it (the SSRF guard, Apprise's schemes)."""
    return service.check_receivers(settings.RECEIVER_ALLOW, settings.APPRISE_SCHEMES)


def rules_text(rules: Mapping[str, Any]) -> str:
    """A rule set in one line (``model bert*, t5 · change ≥ 5%``); an empty one: anything."""
    parts = []
    for name, value in rules.items():
        if name == "min_rel_change":
            parts.append(f"change ≥ {float(value) * 100:g}%")
        elif value is not None:
            values = value if isinstance(value, list) else [value]
            parts.append(f"{name} {', '.join(str(v) for v in values)}")
    return " · ".join(parts) or "anything"


def when_text(when: Any) -> str:
    """``immediately``, or the digest's hours."""
    if not isinstance(when, dict):
        return "immediately"
    return "digest at " + ", ".join(f"{h:02d}:00" for h in when["digest_hours"]) + " UTC"


def describe_subscription(subscription: Subscription) -> dict[str, Any]:
    """A subscription for the pages: its rules, receivers and timing in words."""
    exclude = " or ".join(rules_text(rules) for rules in subscription.exclude)
    return {
        "id": subscription.id,
        "name": subscription.name,
        "owner": subscription.owner,
        "rules": rules_text(subscription.match) + (f"; except {exclude}" if exclude else ""),
        "receivers": [
            {
                "kind": r["kind"],
                "target": receiver_target(r),
                "disabled": bool(r.get("disabled")),
                "disabled_reason": r.get("disabled_reason", ""),
            }
            for r in subscription.receivers
        ],
        "when": when_text(subscription.when),
        "paused": subscription.paused,
        "revision": subscription.revision,
        "source": subscription.source,
        "read_only": subscription.source == "file",
        "updated_at": subscription.updated_at,
    }


def credentials_of(
    subscription: Subscription, public_url: str, before: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """What a receiver's owner needs: each webhook's signing secrets, the feed's URL.

    Masked but for those made since ``before`` (``targets.answered``): the page that
    answers the form that made a secret or token is the one place it is shown in full.
    """
    found: list[dict[str, Any]] = []
    made = subscription.made_feed_token
    for receiver in targets.answered(subscription.receivers, before, made):
        if receiver["kind"] == "webhook":
            what = f"Signing secrets of the webhook {receiver['url']}"
            found.append({"what": what, "secrets": receiver.get("secrets") or []})
        elif receiver["kind"] == "feed" and receiver.get("token"):
            url = f"{public_url.rstrip('/')}/feeds/{receiver['token']}.atom"
            found.append({"what": "Feed URL (the token in it is its only credential)", "url": url})
    return found


def subscription_list(session: Session, token: ApiToken | None) -> list[dict[str, Any]]:
    """The subscriptions ``token`` may see, by name, each with its newest notice's delivery."""
    subscriptions, _ = service.list_subscriptions(session, 0, SUBSCRIPTIONS_SHOWN, token)
    latest = _latest_notices(session, [s.id for s in subscriptions])
    return [{**describe_subscription(s), "last_notice": latest.get(s.id)} for s in subscriptions]


def _latest_notices(session: Session, subscription_ids: list[int]) -> dict[int, dict[str, Any]]:
    newest = (
        select(func.max(Notice.id))
        .where(Notice.subscription_id.in_(subscription_ids))
        .group_by(Notice.subscription_id)
    )
    notices = list(session.scalars(select(Notice).where(Notice.id.in_(newest))))
    states: dict[int, dict[str, int]] = {n.id: defaultdict(int) for n in notices}
    query = select(Delivery.notice_id, Delivery.state).where(Delivery.notice_id.in_(states))
    for notice_id, state in session.execute(query) if notices else ():
        states[notice_id][state] += 1
    return {
        n.subscription_id: {
            "at": n.sent_at or n.created_at,
            "event": n.event,
            "state": n.state,
            "deliveries": ", ".join(f"{count} {state}" for state, count in states[n.id].items()),
        }
        for n in notices
    }


def delivery_log(session: Session, subscription_id: int) -> tuple[list[dict[str, Any]], int]:
    """The newest notices, each delivery with its newest attempts; and how many there are."""
    notices, total = outbox.list_notices(session, subscription_id, 0, NOTICES_SHOWN)
    deliveries = {d["id"]: d for n in notices for d in n["deliveries"]}
    for delivery in deliveries.values():
        delivery["log"] = []
    attempts = select(DeliveryAttempt).where(DeliveryAttempt.delivery_id.in_(deliveries))
    for attempt in session.scalars(attempts.order_by(DeliveryAttempt.id.desc())):
        log = deliveries[attempt.delivery_id]["log"]
        if len(log) < outbox.ATTEMPTS_SHOWN:
            log.append(attempt)
    return notices, total


def in_flight(
    notices: Iterable[Mapping[str, Any]], notice_id: int | None, delivery_id: int | None
) -> bool:
    """Whether the notice or delivery pointed out is being sent now (or in a few seconds)."""
    soon = utcnow() + DUE_SOON
    for notice in notices:
        for delivery in notice["deliveries"]:
            if notice["id"] == notice_id or delivery["id"] == delivery_id:
                due = delivery["next_attempt_at"]
                if delivery["state"] == "sending" or (due is not None and due <= soon):
                    return True
    return False


def follow_url(subscription_id: int, shown: Mapping[str, Any]) -> str | None:
    """Where the page reloads to while what it points out is sent; None: it does not.

    Each reload counts in the URL (``follow``), so that the fragment it keeps does not make
    the browser take the reload for a jump within the page, and so that reloads stop.
    """
    follow = int(shown.get("follow") or 0)
    if follow >= FOLLOW_RELOADS:
        return None
    query = {k: shown[k] for k in ("notice", "delivery", "done") if shown.get(k) is not None}
    anchor = f"#delivery-{shown['delivery']}" if shown.get("delivery") else ""
    anchor = f"#notice-{shown['notice']}" if shown.get("notice") else anchor
    return f"/subscriptions/{subscription_id}?{urlencode({**query, 'follow': follow + 1})}{anchor}"


@dataclass
class SubscriptionForm:
    """The subscription form as typed: shown again, beside its problems, when refused."""

    name: str = ""
    owner: str = ""
    match: str = "{}"
    exclude: str = "[]"
    receivers: str = '[\n  {"kind": "webhook", "url": "https://"}\n]'
    when: str = "immediate"
    digest_hours: str = "9"
    paused: bool = False
    mention_author: bool = False


def subscription_form(
    name: Annotated[str, Form(max_length=1_000)] = "",
    owner: Annotated[str, Form(max_length=1_000)] = "",
    match: Annotated[str, Form(max_length=JSON_TEXT)] = "{}",
    exclude: Annotated[str, Form(max_length=JSON_TEXT)] = "[]",
    receivers: Annotated[str, Form(max_length=JSON_TEXT)] = "[]",
    when: Annotated[str, Form(max_length=20)] = "immediate",
    digest_hours: Annotated[str, Form(max_length=200)] = "",
    paused: Annotated[bool, Form()] = False,
    mention_author: Annotated[bool, Form()] = False,
) -> SubscriptionForm:
    """Dependency: the posted subscription form."""
    return SubscriptionForm(
        name, owner, match, exclude, receivers, when, digest_hours, paused, mention_author
    )


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def form_of(subscription: Subscription) -> SubscriptionForm:
    """The form filled in with a subscription as stored (secrets and tokens left out: kept)."""
    receivers = [
        {
            k: v
            for k, v in r.items()
            if k not in CREDENTIALS and not (k in DEFAULTS and v == DEFAULTS[k])
        }
        for r in targets.answered(subscription.receivers)  # a masked URL sent back: kept
    ]
    digest = isinstance(subscription.when, dict)
    return SubscriptionForm(
        name=subscription.name,
        owner=subscription.owner,
        match=_json(subscription.match),
        exclude=_json(subscription.exclude),
        receivers=_json(receivers),
        when="digest" if digest else "immediate",
        digest_hours=", ".join(map(str, subscription.when["digest_hours"])) if digest else "9",
        paused=subscription.paused,
        mention_author=subscription.mention_author,
    )


def _parsed(fields: Mapping[str, str]) -> tuple[dict[str, Any], FormErrors]:
    """Each field's JSON text as a value; the problems of those that are not JSON."""
    values: dict[str, Any] = {}
    errors: FormErrors = []
    for field, text in fields.items():
        try:
            values[field] = json.loads(text)
        except json.JSONDecodeError as exc:
            where = f"{field} (line {exc.lineno}, column {exc.colno})"
            errors.append({"top": field, "loc": where, "message": f"not JSON: {exc.msg}"})
        except RecursionError:
            errors.append({"top": field, "loc": field, "message": "nested too deeply"})
    return values, errors


def _problems(exc: ValidationError, renamed: Mapping[str, str] | None = None) -> FormErrors:
    """Pydantic's errors with their locations, each under the form field it concerns."""
    found = []
    for error in exc.errors():
        described = describe(dict(error))
        top = str(error["loc"][0]) if error["loc"] else "form"
        top = (renamed or {}).get(top, top)
        message = described["message"].removeprefix("Value error, ")
        found.append({"top": top, "loc": described["loc"], "message": message})
    return found


def domain_problems(error: DomainError) -> FormErrors:
    """A service's refusal, under the fields it names (else the whole form)."""
    if not error.errors:
        return [{"top": "form", "loc": "", "message": error.detail}]
    found = []
    for problem in error.errors:
        loc = str(problem.get("loc") or "")
        field = re.match(r"[a-z_]+", loc)
        top = field.group() if field else "form"
        found.append({"top": top, "loc": loc, "message": str(problem.get("message", ""))})
    return found


def parse_subscription(form: SubscriptionForm) -> tuple[dict[str, Any] | None, FormErrors]:
    """The values to store (as the API stores them), or the form's problems (all of them)."""
    values, errors = _parsed(
        {"match": form.match, "exclude": form.exclude, "receivers": form.receivers}
    )
    hours = form.digest_hours.replace(",", " ").split()
    body = {
        **values,
        "name": form.name,
        "owner": form.owner,
        "when": {"digest_hours": hours} if form.when == "digest" else "immediate",
        "paused": form.paused,
        "mention_author": form.mention_author,
    }
    try:
        model = SubscriptionCreate.model_validate(body)
    except ValidationError as exc:
        known = {e["top"] for e in errors}  # a field that is not JSON: that is its problem
        return None, errors + [p for p in _problems(exc) if p["top"] not in known]
    if errors:
        return None, errors
    return model.model_dump(mode="json", exclude_none=True), []


def save_subscription(
    session: Session,
    form: SubscriptionForm,
    settings: Settings,
    subscription_id: int | None,
    by: str = "",
    token: ApiToken | None = None,
) -> tuple[Subscription | None, FormErrors]:
    """Create (no id) or change a subscription from its form; None and why when refused.

    ``by`` names who did it (the audit log).

    The caller commits; a refusal has rolled the session back.
    """
    values, errors = parse_subscription(form)
    if values is None:
        return None, errors
    try:
        if subscription_id is None:
            check = receiver_check(settings)
            return service.create_subscription(session, values, check, by=by, token=token), []
        saved = service.update_subscription(
            session, subscription_id, values, receiver_check(settings), by=by, token=token
        )
    except NotFound:
        raise
    except DomainError as exc:  # a name taken, a receiver refused, a file's subscription
        session.rollback()
        return None, domain_problems(exc)
    return saved, []


@dataclass
class SilenceForm:
    """The silence form as typed."""

    matchers: str = ""
    hours: str = "24"
    comment: str = ""


def silence_form(
    matchers: Annotated[str, Form(max_length=JSON_TEXT)] = "",
    hours: Annotated[str, Form(max_length=40)] = "",
    comment: Annotated[str, Form(max_length=2_000)] = "",
) -> SilenceForm:
    """Dependency: the posted silence form."""
    return SilenceForm(matchers, hours, comment)


def _hours(text: str) -> tuple[float | None, FormErrors]:
    try:
        hours = float(text)
    except ValueError:
        hours = float("nan")
    longest = MAX_SILENCE / timedelta(hours=1)
    if 0 < hours <= longest:  # NaN is not
        return hours, []
    message = f"a number of hours above 0, at most {longest:g} ({MAX_SILENCE.days} days)"
    return None, [{"top": "hours", "loc": "hours", "message": message}]


def parse_silence(form: SilenceForm) -> tuple[SilenceCreate | None, FormErrors]:
    """The silence to make, from now for the hours given; or the form's problems.

    Every field is checked, so that each problem shows at once: one already found in a
    field (not JSON, not a number) stands for that field.
    """
    values, errors = _parsed({"matchers": form.matchers.strip() or "{}"})
    if values.get("matchers") == {}:  # the schema would call it an empty exclude rule set
        message = 'give at least one matcher, e.g. {"machine": "h100"}'
        errors.append({"top": "matchers", "loc": "matchers", "message": message})
    hours, wrong = _hours(form.hours)
    errors += wrong
    ends_at = utcnow() + timedelta(hours=hours or 1)  # a stand-in when the hours are wrong
    body = {**values, "ends_at": ends_at, "comment": form.comment}
    try:
        silence = SilenceCreate.model_validate(body)
    except ValidationError as exc:
        known = {e["top"] for e in errors}
        problems = _problems(exc, {"ends_at": "hours", "form": "hours"})
        return None, errors + [p for p in problems if p["top"] not in known]
    return (None, errors) if errors else (silence, [])


def silence_lists(session: Session) -> dict[str, list[dict[str, Any]]]:
    """The silences in force or to come, and those that ended last; matchers in words."""
    pending, _ = silences.list_silences(session, "pending", 0, SILENCES_SHOWN)
    active, _ = silences.list_silences(session, "active", 0, SILENCES_SHOWN)
    expired, _ = silences.list_silences(session, "expired", 0, EXPIRED_SHOWN)
    for silence in (*pending, *active, *expired):
        silence["matchers_text"] = rules_text(silence["matchers"])
    return {"silences": active + pending, "expired_silences": expired}


DONE = {
    "created": "Subscription created.",
    "saved": "Saved.",
    "paused": "Paused: no notices are planned for it until it is resumed.",
    "resumed": "Resumed.",
    "deleted": "Subscription deleted.",
    "test": "Test notice sent to every switched-on receiver: its deliveries are below.",
    "redelivered": "Delivery queued again.",
    "silenced": "Silence added.",
    "expired": "Silence expired.",
}
"""What a page says after a form did its work (``?done=``): fixed text, nothing reflected."""


def list_context(
    session: Session,
    token: ApiToken | None,
    form: SubscriptionForm | None = None,
    errors: FormErrors | None = None,
    done: str | None = None,
) -> dict[str, Any]:
    """What the subscriptions page shows (with the new-subscription form as typed)."""
    return {
        "subscriptions": subscription_list(session, token),
        "form": form or SubscriptionForm(),
        "errors": errors or [],
        "done": DONE.get(done or ""),
        **silences_context(session, True, "/subscriptions#silences"),
    }


def detail_context(
    session: Session,
    subscription_id: int,
    settings: Settings,
    token: ApiToken | None,
    form: SubscriptionForm | None = None,
    errors: FormErrors | None = None,
    shown: Mapping[str, int | str | None] | None = None,
    before: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """What one subscription's page shows: it, its secrets, its form, its delivery log.

    ``shown``: the ``notice`` or ``delivery`` to point out, what was ``done``, how many times
    the page reloaded to ``follow`` their sending. ``before``: the receivers before the
    form that was just saved (its new credentials are shown in full, that once).
    """
    shown = shown or {}
    subscription = service.get_subscription(session, subscription_id, token)
    notices, total = delivery_log(session, subscription_id)
    notice, delivery = shown.get("notice"), shown.get("delivery")
    pointed = in_flight(
        notices,
        notice if isinstance(notice, int) else None,
        delivery if isinstance(delivery, int) else None,
    )
    return {
        "subscription": describe_subscription(subscription),
        "credentials": credentials_of(subscription, settings.PUBLIC_URL, before),
        "form": form or form_of(subscription),
        "errors": errors or [],
        "notices": notices,
        "notices_total": total,
        "notice": notice,
        "delivery": delivery,
        "refresh": follow_url(subscription_id, shown) if pointed else None,
        "done": DONE.get(str(shown.get("done") or "")),
    }


def silences_context(
    session: Session,
    may_silence: bool,
    back: str,
    form: SilenceForm | None = None,
    errors: FormErrors | None = None,
) -> dict[str, Any]:
    """The silences section: the lists, and the form if ``may_silence`` (scope ``triage``)."""
    return {
        **silence_lists(session),
        "may_silence": may_silence,
        "silence_form": form or SilenceForm(),
        "silence_errors": errors or [],
        "back": back,
    }


def with_done(path: str, done: str) -> str:
    """``path`` with ``done=`` added (before its fragment): the page then says what happened."""
    path, _, fragment = path.partition("#")
    joined = f"{path}{'&' if '?' in path else '?'}done={done}"
    return f"{joined}#{fragment}" if fragment else joined


SubscriptionFields = Annotated[SubscriptionForm, Depends(subscription_form)]
SilenceFields = Annotated[SilenceForm, Depends(silence_form)]
