"""Subscriptions to findings: list, create, read, change, delete (scope ``admin``)."""

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Response

from app.api.deps import SessionDep
from app.api.responses import WRITES, errors
from app.api.validation import ApiRoute
from app.core import queue
from app.core.bounds import RowId
from app.core.errors import ErrorBody
from app.core.pagination import Page, PageParams
from app.notifications import service
from app.notifications.schemas import SubscriptionCreate, SubscriptionRead, SubscriptionUpdate
from app.tokens.auth import require_scope

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
CHANGE = {**WRITES, **ONE, **NAME_TAKEN}


def _stored(model: SubscriptionCreate | SubscriptionUpdate) -> dict[str, Any]:
    """The fields to store, as the JSON columns hold them (rule fields left out are absent).

    A new or replaced subscription gives every field (defaults for those left out); a PATCH
    only those it sets to a value.
    """
    values = model.model_dump(mode="json", exclude_unset=isinstance(model, SubscriptionUpdate))
    for field in ("match", "exclude"):
        if field in values and values[field] is not None:
            rules = values[field]
            values[field] = (
                {k: v for k, v in rules.items() if v is not None}
                if isinstance(rules, dict)
                else [{k: v for k, v in r.items() if v is not None} for r in rules]
            )
    return {field: value for field, value in values.items() if value is not None}


def _read(subscription: Any) -> SubscriptionRead:
    return SubscriptionRead.model_validate(subscription)


@router.get("", response_model=Page[SubscriptionRead], response_model_exclude_none=True)
def list_subscriptions(session: SessionDep, paging: Paging) -> Page[SubscriptionRead]:
    """Every subscription, by name."""
    items, total = service.list_subscriptions(session, paging.offset, paging.limit)
    return paging.of([_read(s) for s in items], total)


@router.post(
    "",
    status_code=201,
    response_model=SubscriptionRead,
    response_model_exclude_none=True,
    responses={**WRITES, **NAME_TAKEN},
)
def create_subscription(body: SubscriptionCreate, session: SessionDep) -> SubscriptionRead:
    """Subscribe receivers to the findings the rules select (delivery is not built yet)."""
    subscription = service.create_subscription(session, _stored(body))
    queue.commit(session)
    return _read(subscription)


@router.get(
    "/{subscription_id}",
    response_model=SubscriptionRead,
    response_model_exclude_none=True,
    responses=ONE,
)
def get_subscription(subscription_id: RowId, session: SessionDep) -> SubscriptionRead:
    """One subscription."""
    return _read(service.get_subscription(session, subscription_id))


@router.patch(
    "/{subscription_id}",
    response_model=SubscriptionRead,
    response_model_exclude_none=True,
    responses=CHANGE,
)
def update_subscription(
    subscription_id: RowId, body: SubscriptionUpdate, session: SessionDep
) -> SubscriptionRead:
    """Change the fields given; the revision grows by one if anything changed."""
    subscription = service.update_subscription(session, subscription_id, _stored(body))
    queue.commit(session)
    return _read(subscription)


@router.put(
    "/{subscription_id}",
    response_model=SubscriptionRead,
    response_model_exclude_none=True,
    responses=CHANGE,
)
def replace_subscription(
    subscription_id: RowId, body: SubscriptionCreate, session: SessionDep
) -> SubscriptionRead:
    """Replace the whole subscription (fields left out take their defaults)."""
    subscription = service.update_subscription(session, subscription_id, _stored(body))
    queue.commit(session)
    return _read(subscription)


@router.delete("/{subscription_id}", status_code=204, responses=ONE)
def delete_subscription(subscription_id: RowId, session: SessionDep) -> Response:
    """Delete a subscription."""
    service.delete_subscription(session, subscription_id)
    queue.commit(session)
    return Response(status_code=204)
