"""Invalidate, restore or delete a run (scope ``admin``)."""

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, Field

from app.api.deps import SessionDep
from app.api.responses import WRITES, errors
from app.api.validation import ApiRoute
from app.core import queue
from app.core.bounds import RowId
from app.corrections import service
from app.tokens.auth import Actor, require_actor

AdminActor = Annotated[Actor, Depends(require_actor("admin"))]
router = APIRouter(tags=["runs"], route_class=ApiRoute, responses={**WRITES, **errors(404)})


class CorrectionIn(BaseModel):
    """Why the run is wrong (a broken machine, a bad upload...): kept on the run and logged."""

    reason: str = Field(min_length=1, max_length=service.MAX_REASON)


class CorrectionRead(BaseModel):
    """What the correction changed: the findings withdrawn, and those found again."""

    run_id: int
    deleted: bool
    withdrawn_regressions: list[int]
    withdrawn_failures: list[int]
    withdrawn_aggregates: list[int]
    new_regressions: list[int]
    # Restoring: the findings its invalidation had withdrawn, open again.
    reopened_regressions: list[int]
    reopened_failures: list[int]
    reopened_aggregates: list[int]


def _read(correction: service.Correction) -> CorrectionRead:
    return CorrectionRead(
        run_id=correction.run_id, deleted=correction.deleted, **correction.summary()
    )


def _thresholds(request: Request) -> dict[str, object]:
    return dict(request.app.state.settings.DETECTOR_THRESHOLDS or {})


@router.post("/runs/{run_id}/invalidate", response_model=CorrectionRead, responses=errors(409))
def invalidate_run(
    run_id: RowId, body: CorrectionIn, session: SessionDep, actor: AdminActor, request: Request
) -> CorrectionRead:
    """Take a run out of history (scope `admin`).

    Its results leave every series, baseline, aggregate and detection; the regressions,
    failures and aggregate findings it caused are withdrawn (`invalid`, with the reason); its
    series and its machine and channel are judged again. The run stays, marked `invalid`.
    """
    service.check_project(session, actor.token, run_id, "path.run_id")
    correction = service.invalidate(session, run_id, body.reason, actor.label, _thresholds(request))
    queue.commit(session)
    return _read(correction)


@router.post("/runs/{run_id}/restore", response_model=CorrectionRead, responses=errors(409))
def restore_run(
    run_id: RowId, session: SessionDep, actor: AdminActor, request: Request
) -> CorrectionRead:
    """Put an invalidated run back into history (scope `admin`).

    Its results return to their series; the findings its invalidation withdrew are open again
    (unless someone triaged them since) and the steps found without it are withdrawn; its
    series and its machine and channel are judged again.
    """
    service.check_project(session, actor.token, run_id, "path.run_id")
    correction = service.restore(session, run_id, actor.label, _thresholds(request))
    queue.commit(session)
    return _read(correction)


@router.delete("/runs/{run_id}", response_model=CorrectionRead)
def delete_run(
    run_id: RowId,
    session: SessionDep,
    actor: AdminActor,
    request: Request,
    reason: Annotated[str, Query(min_length=1, max_length=service.MAX_REASON)] = "deleted",
) -> CorrectionRead:
    """Invalidate a run (unless it was), then delete it and its rows (scope `admin`)."""
    service.check_project(session, actor.token, run_id, "path.run_id")
    correction = service.delete_run(session, run_id, reason, actor.label, _thresholds(request))
    queue.commit(session)
    return _read(correction)
