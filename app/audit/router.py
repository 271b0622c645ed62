"""The audit log, read with scope ``admin``."""

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from app.api.deps import SessionDep
from app.api.responses import READS, errors
from app.api.validation import ApiRoute
from app.audit import service
from app.audit.schemas import AuditEntryRead, AuditPage
from app.core.bounds import QueryTime, RowId
from app.tokens.auth import Actor, require_actor

AdminActor = Annotated[Actor, Depends(require_actor("admin"))]

router = APIRouter(
    prefix="/audit", tags=["audit"], route_class=ApiRoute, responses={**READS, **errors(401, 403)}
)


@router.get("", response_model=AuditPage)
def list_audit(
    session: SessionDep,
    actor: AdminActor,
    action: Annotated[str | None, Query(max_length=64, description="exact or a prefix")] = None,
    target: Annotated[
        str | None, Query(max_length=128, description="`<kind>:<id>`, or a prefix")
    ] = None,
    by: Annotated[
        str | None, Query(alias="actor", max_length=200, description="part of who")
    ] = None,
    since: QueryTime | None = None,
    before: Annotated[RowId | None, Query(description="`next_before` of the last page")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> AuditPage:
    """Every write that is not an upload, newest first (scope ``admin``).

    Triage, run invalidation and deletion, subscriptions, silences, tokens and annotations:
    who (the token, and the dashboard session), when, what, and the changed fields.
    """
    entries = service.list_entries(
        session,
        action=action,
        target=target,
        actor=by,
        since=since,
        before_id=before,
        limit=limit + 1,
    )
    more = len(entries) > limit
    entries = entries[:limit]
    return AuditPage(
        items=[AuditEntryRead.model_validate(e) for e in entries],
        next_before=entries[-1].id if more else None,
    )
