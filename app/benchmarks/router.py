"""The catalog: machines, benchmarks, and series search."""

from typing import Annotated

from fastapi import APIRouter, Depends

from app.api.deps import ProjectQuery, ReadAccess, SessionDep
from app.api.responses import READS, errors
from app.api.validation import ApiRoute
from app.benchmarks import service
from app.benchmarks.models import Machine, Series
from app.benchmarks.schemas import BenchmarkRead, MachineRead, SeriesRead
from app.core.bounds import RowId
from app.core.pagination import Page, PageParams

router = APIRouter(
    tags=["catalog"], dependencies=[ReadAccess], route_class=ApiRoute, responses=READS
)
Paging = Annotated[PageParams, Depends()]


def series_filter(
    suite: str | None = None,
    model: str | None = None,
    category: str | None = None,
    mode: str | None = None,
    precision: str | None = None,
    config: str | None = None,
    metric: str | None = None,
    machine: str | None = None,
    channel: str | None = None,
    project: ProjectQuery = None,
) -> service.SeriesFilter:
    """The filter from the query, each parameter in the schema as the API takes it.

    Not the dataclass as a dependency: its ``project`` would be a bare string in the schema,
    which then calls ``project=`` valid while the API refuses it.
    """
    return service.SeriesFilter(
        suite, model, category, mode, precision, config, metric, machine, channel, project
    )


Filter = Annotated[service.SeriesFilter, Depends(series_filter)]


@router.get("/machines", response_model=list[MachineRead])
def list_machines(session: SessionDep, project: ProjectQuery = None) -> list[Machine]:
    """Every machine results were posted from (for `project`, if given: machines are shared)."""
    return service.list_machines(session, project)


@router.get("/benchmarks", response_model=Page[BenchmarkRead])
def list_benchmarks(session: SessionDep, where: Filter, paging: Paging) -> Page[BenchmarkRead]:
    """Benchmark cases, filtered by suite / model / category / mode / precision / config.

    Benchmarks are shared by every project: `project` selects those with a series of it.
    """
    items, total = service.list_benchmarks(session, where, paging.offset, paging.limit)
    return paging.of([BenchmarkRead.model_validate(b) for b in items], total)


@router.get("/series", response_model=Page[SeriesRead])
def search_series(session: SessionDep, where: Filter, paging: Paging) -> Page[SeriesRead]:
    """Series by suite, model, mode, precision, config, metric, machine, channel or project."""
    items, total = service.search_series(session, where, paging.offset, paging.limit)
    return paging.of([SeriesRead.model_validate(s) for s in items], total)


@router.get("/series/{series_id}", response_model=SeriesRead, responses=errors(404))
def get_series(series_id: RowId, session: SessionDep) -> Series:
    """One series."""
    return service.get_series(session, series_id)
