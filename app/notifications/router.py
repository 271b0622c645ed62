"""Subscriptions, their notices, deliveries and feeds; silences.

Subscriptions and deliveries need scope ``admin``; silences are read by every reader and
made by ``triage``; a feed's URL holds its token, which is all a feed reader needs.
"""

import json
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Request, Response
from fastapi.concurrency import run_in_threadpool

from app.api.deps import ReadAccess, SessionDep, TriageActor
from app.api.responses import READS, WRITES, errors
from app.api.validation import ApiRoute
from app.core import queue
from app.core.bounds import RowId
from app.core.config import Settings
from app.core.db import utcnow
from app.core.errors import DomainError, ErrorBody, InvalidInput, NotFound
from app.core.pagination import Page, PageParams
from app.notifications import feed, issue_sync, outbox, service, silences, targets
from app.notifications.schemas import (
    DeliveryRead,
    NoticeRead,
    SilenceCreate,
    SilenceRead,
    SubscriptionCreate,
    SubscriptionRead,
    SubscriptionUpdate,
    stored_values,
)
from app.tokens.auth import Actor, require_actor, require_scope

NAME_TAKEN: dict[int | str, dict[str, Any]] = {
    409: {"model": ErrorBody, "description": "Another subscription has this name"}
}
router = APIRouter(
    prefix="/subscriptions",
    tags=["subscriptions"],
    dependencies=[Depends(require_scope("admin"))],
    route_class=ApiRoute,
    responses=errors(401, 403, 422),
)
Paging = Annotated[PageParams, Depends()]
ONE = errors(404)
AdminActor = Annotated[Actor, Depends(require_actor("admin"))]  # who, for the audit log
CHANGE = {**WRITES, **ONE, **NAME_TAKEN}


def _read(subscription: Any, before: list[dict[str, Any]] | None = None) -> SubscriptionRead:
    """The answer: credentials masked, but those made since ``before`` (``targets.answered``)."""
    read = SubscriptionRead.model_validate(
        {
            **{
                f: getattr(subscription, f)
                for f in SubscriptionRead.model_fields
                if f != "receivers"
            },
            "receivers": targets.answered(
                subscription.receivers, before, subscription.made_feed_token
            ),
        }
    )
    return read


def _receivers_now(session: SessionDep, subscription_id: int, actor: Actor) -> list[dict[str, Any]]:
    """The receivers as they are before a change (NotFound for one the actor may not see)."""
    subscription = service.get_subscription(session, subscription_id, actor.token)
    return [dict(r) for r in subscription.receivers]


def _targets(request: Request) -> service.TargetCheck:
    settings: Settings = request.app.state.settings
    return service.check_receivers(settings.RECEIVER_ALLOW, settings.APPRISE_SCHEMES)


@router.get("", response_model=Page[SubscriptionRead], response_model_exclude_none=True)
def list_subscriptions(
    session: SessionDep, paging: Paging, actor: AdminActor
) -> Page[SubscriptionRead]:
    """Every subscription, by name (a project's token: its project's only); credentials masked."""
    items, total = service.list_subscriptions(session, paging.offset, paging.limit, actor.token)
    return paging.of([_read(s) for s in items], total)


@router.post(
    "",
    status_code=201,
    response_model=SubscriptionRead,
    response_model_exclude_none=True,
    responses={**WRITES, **NAME_TAKEN},
)
def create_subscription(
    body: SubscriptionCreate, session: SessionDep, request: Request, actor: AdminActor
) -> SubscriptionRead:
    """Subscribe receivers to the findings the rules select.

    A webhook without ``secrets`` gets a signing secret, a feed its token: this answer is
    the only one that shows them (every read masks them). A token limited to a project
    subscribes to its project's findings only (its project is added to a match naming
    none; another is refused, 403). A receiver whose host resolves to a loopback, private,
    link-local or metadata address is refused (422) unless the operator allows it
    (``BENCHWATCH_RECEIVER_ALLOW``).
    """
    subscription = service.create_subscription(
        session, stored_values(body), _targets(request), by=actor.label, token=actor.token
    )
    queue.commit(session)
    return _read(subscription, before=[])


@router.get(
    "/{subscription_id}",
    response_model=SubscriptionRead,
    response_model_exclude_none=True,
    responses=ONE,
)
def get_subscription(
    subscription_id: RowId, session: SessionDep, actor: AdminActor
) -> SubscriptionRead:
    """One subscription, its credentials masked."""
    return _read(service.get_subscription(session, subscription_id, actor.token))


@router.patch(
    "/{subscription_id}",
    response_model=SubscriptionRead,
    response_model_exclude_none=True,
    responses=CHANGE,
)
def update_subscription(
    subscription_id: RowId,
    body: SubscriptionUpdate,
    session: SessionDep,
    request: Request,
    actor: AdminActor,
) -> SubscriptionRead:
    """Change the fields given; the revision grows by one if anything changed.

    A subscription from the subscriptions file is changed there only (409).
    """
    before = _receivers_now(session, subscription_id, actor)
    subscription = service.update_subscription(
        session,
        subscription_id,
        stored_values(body),
        _targets(request),
        by=actor.label,
        token=actor.token,
    )
    queue.commit(session)
    return _read(subscription, before)


@router.put(
    "/{subscription_id}",
    response_model=SubscriptionRead,
    response_model_exclude_none=True,
    responses=CHANGE,
)
def replace_subscription(
    subscription_id: RowId,
    body: SubscriptionCreate,
    session: SessionDep,
    request: Request,
    actor: AdminActor,
) -> SubscriptionRead:
    """Replace the whole subscription (fields left out take their defaults)."""
    before = _receivers_now(session, subscription_id, actor)
    subscription = service.update_subscription(
        session,
        subscription_id,
        stored_values(body),
        _targets(request),
        by=actor.label,
        token=actor.token,
    )
    queue.commit(session)
    return _read(subscription, before)


@router.delete("/{subscription_id}", status_code=204, responses=ONE)
def delete_subscription(subscription_id: RowId, session: SessionDep, actor: AdminActor) -> Response:
    """Delete a subscription."""
    service.delete_subscription(session, subscription_id, by=actor.label, token=actor.token)
    queue.commit(session)
    return Response(status_code=204)


@router.post(
    "/{subscription_id}/test",
    status_code=202,
    response_model=NoticeRead,
    responses={**WRITES, **ONE},
)
def send_test_notice(
    subscription_id: RowId, session: SessionDep, request: Request, actor: AdminActor
) -> NoticeRead:
    """Send a made-up notice to every receiver now; its deliveries show how it went."""
    service.get_subscription(session, subscription_id, actor.token)
    settings: Settings = request.app.state.settings
    notice = outbox.send_test_notice(session, subscription_id, settings.PUBLIC_URL)
    queue.commit(session)
    return NoticeRead(**outbox.notice_with_deliveries(session, notice))


@router.get("/{subscription_id}/notices", response_model=Page[NoticeRead], responses=ONE)
def list_notices(
    subscription_id: RowId, session: SessionDep, paging: Paging, actor: AdminActor
) -> Page[NoticeRead]:
    """The subscription's notices, newest first, each with its deliveries (the delivery log)."""
    service.get_subscription(session, subscription_id, actor.token)
    items, total = outbox.list_notices(session, subscription_id, paging.offset, paging.limit)
    return paging.of([NoticeRead(**n) for n in items], total)


deliveries = APIRouter(
    prefix="/deliveries",
    tags=["subscriptions"],
    dependencies=[Depends(require_scope("admin"))],
    route_class=ApiRoute,
    responses=errors(401, 403, 404, 422),
)


@deliveries.get("/{delivery_id}", response_model=DeliveryRead)
def get_delivery(delivery_id: RowId, session: SessionDep, actor: AdminActor) -> DeliveryRead:
    """One delivery with its newest attempts: time, status, latency, error."""
    service.subscription_of_delivery(session, delivery_id, actor.token)
    return DeliveryRead(**outbox.get_delivery(session, delivery_id))


@deliveries.post(
    "/{delivery_id}/redeliver",
    status_code=202,
    response_model=DeliveryRead,
    responses={**WRITES, **errors(409)},
)
def redeliver(delivery_id: RowId, session: SessionDep, actor: AdminActor) -> DeliveryRead:
    """Send the delivery again now (the same notice: the same webhook-id)."""
    service.subscription_of_delivery(session, delivery_id, actor.token)
    delivery = outbox.redeliver(session, delivery_id)
    queue.commit(session)
    return DeliveryRead(**outbox.describe_delivery(delivery))


silence_reads = APIRouter(
    prefix="/silences",
    tags=["silences"],
    dependencies=[ReadAccess],
    route_class=ApiRoute,
    responses=READS,
)
silence_writes = APIRouter(
    prefix="/silences", tags=["silences"], route_class=ApiRoute, responses={**WRITES, **ONE}
)
SilenceState = Literal["pending", "active", "expired"]


@silence_reads.get("", response_model=Page[SilenceRead])
def list_silences(
    session: SessionDep, paging: Paging, state: SilenceState | None = None
) -> Page[SilenceRead]:
    """Silences, those ending last first; filter by ``state``."""
    items, total = silences.list_silences(session, state, paging.offset, paging.limit)
    return paging.of([SilenceRead(**s) for s in items], total)


@silence_writes.post("", status_code=201, response_model=SilenceRead)
def create_silence(body: SilenceCreate, session: SessionDep, actor: TriageActor) -> SilenceRead:
    """Hold back notices of the findings the matchers select until ``ends_at`` (``triage``).

    A token limited to a project silences that project's findings only: its project is
    added to matchers that name none, and other projects are refused (403).
    """
    matchers = body.matchers.model_dump(mode="json", exclude_none=True)
    silence = silences.create_silence(
        session,
        silences.scoped(actor.token, matchers, "body.matchers.project"),
        body.starts_at,
        body.ends_at,
        body.comment,
        actor.label,
    )
    queue.commit(session)
    return SilenceRead(**silences.describe(silence, utcnow()))


@silence_writes.delete("/{silence_id}", response_model=SilenceRead)
def expire_silence(silence_id: RowId, session: SessionDep, actor: TriageActor) -> SilenceRead:
    """End a silence now; it stays listed, expired (scope ``triage``)."""
    silence = silences.expire_silence(session, silence_id, by=actor.label, token=actor.token)
    queue.commit(session)
    return SilenceRead(**silences.describe(silence, utcnow()))


feeds = APIRouter(tags=["subscriptions"], route_class=ApiRoute, responses=errors(404, 422))
FeedToken = Annotated[str, Path(pattern=r"^[A-Za-z0-9_-]{32,64}$")]


@feeds.get(
    "/feeds/{token}.atom",
    response_class=Response,
    responses={200: {"content": {"application/atom+xml": {}}}},
)
def subscription_feed(token: FeedToken, session: SessionDep, request: Request) -> Response:
    """A subscription's notices as an Atom feed, at the URL of its feed receiver's token."""
    found = outbox.feed_notices(session, token, feed.ENTRIES)
    if found is None:
        raise NotFound("no feed has this token")
    subscription, notices = found
    settings: Settings = request.app.state.settings
    self_url = f"{settings.PUBLIC_URL.rstrip('/')}/feeds/{token}.atom"
    body = feed.atom(subscription, notices, self_url, utcnow())
    return Response(content=body, media_type="application/atom+xml; charset=utf-8")


github_hooks = APIRouter(tags=["notifications"], route_class=ApiRoute)
WEBHOOK_BYTES = 1024 * 1024  # GitHub's issues events are a few KiB; this is ample


@github_hooks.post(
    "/github/webhook",
    responses={
        **WRITES,
        **errors(404),
        200: {"description": "taken (or ignored: not an issue's close or reopen)"},
    },
)
async def github_webhook(request: Request) -> dict[str, Any]:
    """GitHub's webhook (`issues` events): a linked issue closed or reopened triages its groups.

    Signed with `BENCHWATCH_GITHUB_WEBHOOK_SECRET` (`X-Hub-Signature-256`): a wrong or missing
    signature is a 401, and without the secret configured the endpoint is a 404. A closed
    issue's groups take `BENCHWATCH_GITHUB_CLOSED_STATUS` (fixed); a reopened one's,
    acknowledged; each audited as `github: <login>`. `ping` and other events are answered and
    ignored; an event told twice acts once.
    """
    settings: Settings = request.app.state.settings
    secret = settings.GITHUB_WEBHOOK_SECRET.get_secret_value()
    if not secret:
        raise NotFound("no GitHub webhook here (BENCHWATCH_GITHUB_WEBHOOK_SECRET is not set)")
    body = await request.body()
    if len(body) > WEBHOOK_BYTES:
        raise PayloadTooLarge(f"a webhook body of at most {WEBHOOK_BYTES} bytes")
    if not issue_sync.verify(secret, body, request.headers.get("X-Hub-Signature-256", "")):
        raise BadSignature("the X-Hub-Signature-256 does not match this body and the secret")
    kind = request.headers.get("X-GitHub-Event", "")
    if kind != "issues":
        return {"event": kind, "groups": []}
    try:
        event = json.loads(body)
    except ValueError as exc:
        raise InvalidInput(f"the webhook body is not JSON: {exc}") from exc
    if not isinstance(event, dict):
        raise InvalidInput("the webhook body is not a JSON object")

    def apply() -> list[int]:
        with request.app.state.database.session_scope() as session:
            return issue_sync.apply_event(session, settings, event)

    return {"event": kind, "groups": await run_in_threadpool(apply)}


class BadSignature(DomainError):
    """A webhook whose signature does not match."""

    status_code = 401


class PayloadTooLarge(DomainError):
    """A webhook body over its bound."""

    status_code = 413
