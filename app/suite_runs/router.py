"""Suite runs in flight and done: their progress per shard, and why one failed."""

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query

from app.api.deps import ReadAccess, SessionDep
from app.api.responses import READS, errors
from app.api.validation import ApiRoute
from app.core.bounds import RowId
from app.core.pagination import Page, PageParams
from app.suite_runs import service
from app.suite_runs.schemas import ShardRead, SuiteRunDetail, SuiteRunRead

router = APIRouter(
    tags=["suite runs"], dependencies=[ReadAccess], route_class=ApiRoute, responses=READS
)


@router.get("/suite-runs", response_model=Page[SuiteRunRead])
def list_suite_runs(
    session: SessionDep,
    paging: Annotated[PageParams, Depends()],
    machine: Annotated[str | None, Query(max_length=128)] = None,
    status: Literal["running", "finished", "failed"] | None = None,
) -> Page[SuiteRunRead]:
    """Suite runs, newest first; filter by machine and status."""
    items, total = service.list_suite_runs(session, machine, status, paging.offset, paging.limit)
    return paging.of([SuiteRunRead.of(s) for s in items], total)


@router.get("/suite-runs/{suite_run_id}", response_model=SuiteRunDetail, responses=errors(404))
def get_suite_run(suite_run_id: RowId, session: SessionDep) -> SuiteRunDetail:
    """One suite run with each shard's status, attempts, worker and reason."""
    suite_run = service.get_suite_run(session, suite_run_id)
    shards = [ShardRead.model_validate(shard) for shard in suite_run.shards]
    return SuiteRunDetail(**SuiteRunRead.of(suite_run).model_dump(), shards=shards)
