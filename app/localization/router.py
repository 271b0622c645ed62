"""Localizations: read by every reader, asked for with scope ``triage``."""

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request, Response

from app.api.deps import ReadAccess, SessionDep, TriageActor
from app.api.responses import READS, WRITES, errors
from app.api.validation import ApiRoute
from app.core import queue
from app.core.bounds import RowId
from app.core.config import Settings
from app.core.errors import InvalidInput
from app.core.pagination import Page, PageParams
from app.localization import configs, service
from app.localization.models import State
from app.localization.schemas import LocalizationCreate, LocalizationDetail, LocalizationRead

reads = APIRouter(
    prefix="/localizations",
    tags=["localizations"],
    dependencies=[ReadAccess],
    route_class=ApiRoute,
    responses=READS,
)
writes = APIRouter(
    prefix="/localizations", tags=["localizations"], route_class=ApiRoute, responses=WRITES
)
Paging = Annotated[PageParams, Depends()]
ASK_ANSWERS: dict[int | str, dict[str, Any]] = {
    200: {"description": "The finding's localization already queued or running"},
    **errors(404, 409),
}


@reads.get("", response_model=Page[LocalizationRead])
def list_localizations(
    session: SessionDep,
    paging: Paging,
    kind: Literal["regression", "failure", "aggregate", "configs"] | None = None,
    finding_id: RowId | None = None,
    group_id: RowId | None = None,
    state: Annotated[list[State] | None, Query()] = None,
) -> Page[LocalizationRead]:
    """Localizations, newest first, filtered.

    Of a finding (``kind`` and ``finding_id``; a ``configs`` localization's is its slow
    benchmark's id), of an alert group, in some ``state`` (repeat it for several).
    """
    items, total = service.list_localizations(
        session,
        kind=kind,
        finding_id=finding_id,
        group_id=group_id,
        states=state or [],
        offset=paging.offset,
        limit=paging.limit,
    )
    return paging.of([LocalizationRead.model_validate(one) for one in items], total)


@reads.get("/{localization_id}", response_model=LocalizationDetail, responses=errors(404))
def get_localization(localization_id: RowId, session: SessionDep) -> LocalizationDetail:
    """One localization with every probe it measured, their samples and decisions."""
    found = service.get_localization(session, localization_id)
    return LocalizationDetail.model_validate(found)


@writes.post("", status_code=201, response_model=LocalizationRead, responses=ASK_ANSWERS)
def ask_localization(
    body: LocalizationCreate,
    request: Request,
    response: Response,
    session: SessionDep,
    actor: TriageActor,
) -> LocalizationRead:
    """Localize a finding on its machine (scope ``triage``): queued for the machine's worker.

    A finding has one localization at a time: asking while one is queued or running answers
    it (200). Refused (409) when no benchwatch worker measures the finding's case (not a
    worker's run, and no command suite mapped in ``BENCHWATCH_LOCALIZE_SUITES``) or the
    machine ran ``BENCHWATCH_LOCALIZE_BUDGET`` in the last 24 hours. A token limited to a
    project asks for its project's findings only (403).

    ``configs``: the compiler settings that make a case slower under one config than under
    another on one run (``run_id``, ``slow_benchmark_id``, ``fast_benchmark_id``: one case,
    each with a latency on the run, the slow one slower beyond 5%; else 422 naming the field).
    """
    if problems := body.problems():
        first = problems[0]
        raise InvalidInput(
            f"{len(problems)} problem(s); first at {first['loc']}: {first['message']}",
            errors=problems,
        )
    settings: Settings = request.app.state.settings
    if body.kind == "configs":
        # problems() saw to them
        assert body.run_id is not None
        assert body.slow_benchmark_id is not None
        assert body.fast_benchmark_id is not None
        localization, new = configs.request_configs_localization(
            session,
            body.run_id,
            body.slow_benchmark_id,
            body.fast_benchmark_id,
            started_by=actor.label,
            budget=settings.LOCALIZE_BUDGET,
            token=actor.token,
        )
    else:
        assert body.id is not None  # problems()
        localization, new = service.request_localization(
            session,
            body.kind,
            body.id,
            started_by=actor.label,
            budget=settings.LOCALIZE_BUDGET,
            command_suites=settings.LOCALIZE_SUITES,
            token=actor.token,
        )
    queue.commit(session)
    if not new:
        response.status_code = 200
    return LocalizationRead.model_validate(localization)
