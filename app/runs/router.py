"""Runs: ingest one with all its results, list them, read one; a series' points."""

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response

from app.api.bounds import QueryTime, RowId
from app.api.deps import IngestToken, RawBody, ReadAccess, SessionDep
from app.api.responses import READS, WRITES, errors
from app.api.validation import ApiRoute, OneStepJSONRoute
from app.benchmarks import service as catalog
from app.benchmarks.schemas import Point, SeriesPoints, SeriesRead
from app.core import queue
from app.core.pagination import CURSOR_MAX_LENGTH, decode_cursor, encode_cursor
from app.runs import service
from app.runs.downsample import downsample_indices
from app.runs.models import Run
from app.runs.schemas import ResultRead, RunDetail, RunIn, RunPage, RunRead

router = APIRouter(tags=["runs"], route_class=OneStepJSONRoute, responses=WRITES)
reads = APIRouter(tags=["runs"], dependencies=[ReadAccess], route_class=ApiRoute, responses=READS)
Cursor = Annotated[
    str | None,
    Query(max_length=CURSOR_MAX_LENGTH, description="`next_cursor` of the previous page"),
]


@router.post(
    "/runs",
    status_code=201,
    response_model=RunRead,
    responses={
        200: {"description": "A retry: the run stored earlier under this key"},
        **errors(409),
    },
)
def create_run(
    run_in: RunIn, body: RawBody, session: SessionDep, token: IngestToken, response: Response
) -> Run:
    """Ingest one run with all its results; idempotent on `key`, all-or-nothing.

    A retry must send the same body: the stored run answers it with 200, any other body
    under the same key gets 409.
    """
    ingested = service.ingest_run(session, run_in, source=token.name, body=body)
    queue.commit(session)
    if not ingested.created:
        response.status_code = 200
    return ingested.run


@reads.get("/runs", response_model=RunPage)
def list_runs(
    session: SessionDep,
    machine: str | None = None,
    channel: str | None = None,
    trigger: str | None = None,
    tier: str | None = None,
    branch: str | None = None,
    commit: str | None = None,
    since: QueryTime | None = None,
    until: QueryTime | None = None,
    cursor: Cursor = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> RunPage:
    """Runs newest first, keyset-paginated; filter by machine, channel, trigger, time, ..."""
    where = service.RunFilter(machine, channel, trigger, tier, branch, commit, since, until)
    after = decode_cursor(cursor) if cursor else None
    runs = service.list_runs(session, where, after, limit + 1)
    more = len(runs) > limit
    runs = runs[:limit]
    next_cursor = encode_cursor(runs[-1].started_at, runs[-1].id) if more else None
    return RunPage(items=[RunRead.model_validate(r) for r in runs], next_cursor=next_cursor)


@reads.get("/runs/{run_id}", response_model=RunDetail, responses=errors(404))
def get_run(run_id: RowId, session: SessionDep) -> RunDetail:
    """One run with every result."""
    run = service.get_run(session, run_id)
    results = [ResultRead(**row) for row in service.list_run_results(session, run_id)]
    return RunDetail(**RunRead.model_validate(run).model_dump(), results=results)


@reads.get("/series/{series_id}/points", response_model=SeriesPoints, responses=errors(404))
def list_series_points(
    series_id: RowId,
    session: SessionDep,
    since: QueryTime | None = None,
    until: QueryTime | None = None,
    max_points: Annotated[
        int | None,
        Query(
            ge=10,
            le=100_000,
            description=(
                "Downsample to about this many points, keeping each bucket's first, last, "
                "lowest, highest and first failed point"
            ),
        ),
    ] = None,
    include_samples: bool = False,
) -> SeriesPoints:
    """A series' points in a time range, oldest first, optionally downsampled."""
    series = catalog.get_series(session, series_id)
    rows = service.series_points(session, series_id, since, until)
    keep = (
        downsample_indices([r.value for r in rows], max_points) if max_points else range(len(rows))
    )
    points = [_point(rows[i], include_samples) for i in keep]
    return SeriesPoints(
        series=SeriesRead.model_validate(series),
        total=len(rows),
        downsampled=len(points) < len(rows),
        points=points,
    )


def _point(row: Any, include_samples: bool) -> Point:
    samples = row.samples or None
    return Point.model_construct(  # from stored, typed columns: nothing to validate
        run_id=row.run_id,
        measured_at=row.measured_at,
        status=row.status,
        value=row.value,
        text_value=row.text_value,
        commit=row.commit,
        samples_min=min(samples) if samples else None,
        samples_max=max(samples) if samples else None,
        samples=samples if include_samples else None,
    )
