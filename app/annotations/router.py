"""Annotations: read by every reader, made and deleted with scope ``triage``."""

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from app.annotations import service
from app.annotations.schemas import AnnotationCreate, AnnotationRead
from app.api.deps import ReadAccess, SessionDep, TriageActor
from app.api.responses import READS, WRITES, errors
from app.api.validation import ApiRoute
from app.core import queue
from app.core.bounds import QueryTime, RowId
from app.core.pagination import Page, PageParams

reads = APIRouter(
    prefix="/annotations",
    tags=["annotations"],
    dependencies=[ReadAccess],
    route_class=ApiRoute,
    responses=READS,
)
writes = APIRouter(
    prefix="/annotations",
    tags=["annotations"],
    route_class=ApiRoute,
    responses={**WRITES, **errors(404)},
)
Paging = Annotated[PageParams, Depends()]


@reads.get("", response_model=Page[AnnotationRead])
def list_annotations(
    session: SessionDep,
    paging: Paging,
    machine: Annotated[str | None, Query(max_length=128)] = None,
    channel: Annotated[str | None, Query(max_length=64)] = None,
    since: QueryTime | None = None,
    until: QueryTime | None = None,
) -> Page[AnnotationRead]:
    """Annotations, newest first, filtered by where they apply and when.

    ``machine`` and ``channel`` keep those that apply there (global ones too); ``since`` and
    ``until`` those that overlap the range.
    """
    items, total = service.list_annotations(
        session, machine, channel, since, until, paging.offset, paging.limit
    )
    return paging.of([AnnotationRead.model_validate(a) for a in items], total)


@writes.post("", status_code=201, response_model=AnnotationRead)
def create_annotation(
    body: AnnotationCreate, session: SessionDep, actor: TriageActor
) -> AnnotationRead:
    """Note an event on the timeline: drawn on the series charts it applies to (``triage``).

    A token limited to a project must name its own ``project`` (403 otherwise).
    """
    annotation = service.create_annotation(
        session,
        body.at,
        body.ends_at,
        body.machine,
        body.channel,
        body.text,
        body.url,
        actor.label,
        project=body.project,
        token=actor.token,
    )
    queue.commit(session)
    return AnnotationRead.model_validate(annotation)


@writes.delete("/{annotation_id}", response_model=AnnotationRead)
def delete_annotation(
    annotation_id: RowId, session: SessionDep, actor: TriageActor
) -> AnnotationRead:
    """Delete an annotation; answers what it was (scope ``triage``).

    A token limited to a project deletes only that project's (403 otherwise).
    """
    annotation = AnnotationRead.model_validate(service.get_annotation(session, annotation_id))
    service.delete_annotation(session, annotation_id, by=actor.label, token=actor.token)
    queue.commit(session)
    return annotation
