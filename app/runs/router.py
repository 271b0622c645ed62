"""Runs: ingest one with all its results, list them, read one; a series' points."""

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from app.api.deps import IngestToken, ProjectQuery, RawBody, ReadAccess, SessionDep
from app.api.responses import READS, WRITES, errors
from app.api.validation import ApiRoute, OneStepJSONRoute
from app.benchmarks import service as catalog
from app.benchmarks.schemas import Point, SeriesPoints, SeriesRead
from app.core import queue
from app.core.bounds import QueryTime, RowId
from app.core.errors import InvalidInput
from app.core.pagination import (
    CURSOR_MAX_LENGTH,
    decode_cursor,
    decode_offset,
    encode_cursor,
    encode_offset,
    within_bytes,
)
from app.runs import ingest
from app.runs import reads as run_reads
from app.runs.downsample import downsample_indices
from app.runs.models import Run
from app.runs.schemas import ResultRead, RunDetail, RunIn, RunPage, RunRead
from app.tokens import service as tokens_service

router = APIRouter(tags=["runs"], route_class=OneStepJSONRoute, responses=WRITES)
reads = APIRouter(tags=["runs"], dependencies=[ReadAccess], route_class=ApiRoute, responses=READS)
Cursor = Annotated[
    str | None,
    Query(max_length=CURSOR_MAX_LENGTH, description="`next_cursor` of the previous page"),
]

# What one anonymous read may cost: a page of a run's results, the points of one answer (with
# samples, each point may carry thousands), and the rows one points query reads at most.
RESULTS_PAGE = 5_000
MAX_POINTS = 10_000
MAX_SAMPLED_POINTS = 1_000
MAX_POINTS_READ = 100_000
# About the bytes of samples, extra and reason (as stored) one page of a run's results may
# ship: a result of 50,000 samples is about 350 KB of JSON, so such a run answers a few a page.
ANSWER_BYTES = 2 * 2**20


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
    run_in: RunIn,
    body: RawBody,
    session: SessionDep,
    token: IngestToken,
    response: Response,
    request: Request,
) -> Run:
    """Ingest one run with all its results; idempotent on `key`, all-or-nothing.

    A retry must send the same body: the stored run answers it with 200, any other body
    under the same key gets 409. With `shard`, the jobs of one workflow post parts of one
    run under its key, each naming its shard (the run's key is then `<key>/<machine>/<channel>`:
    a workflow on several machines makes a run on each): a new shard is added (201), a retry
    of a stored one answers 200, another payload under its name 409; the run is `partial` until
    `shard.expected` shards are in (or none came for `BENCHWATCH_RUN_SHARDS_QUIET_S`), and
    only then detected. A run of a branch other than its channel's default
    (`BENCHWATCH_DEFAULT_BRANCHES`) is stored under the channel `<channel>@<branch>`, apart
    from the default branch's history, and gets verdicts (`/runs/{id}/verdicts`). A run is
    known by its `project` and `key` together (the same key in two projects is two runs);
    a token limited to a project gets 403 for a run of another one. A `started_at` or
    `finished_at` outside `BENCHWATCH_RUN_TIME_BACK_DAYS` days ago to
    `BENCHWATCH_RUN_TIME_AHEAD_DAYS` ahead is a 422 unless the token has scope `admin`.
    """
    tokens_service.check_machine(token, run_in.machine.name)
    tokens_service.check_project(token, run_in.project, "body.project")
    ingest.check_run_time(run_in, token.scopes, request.app.state.settings)
    ingested = ingest.ingest_run(
        session,
        run_in,
        source=token.name,
        body=body,
        default_branches=request.app.state.settings.DEFAULT_BRANCHES,
    )
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
    project: ProjectQuery = None,
    cursor: Cursor = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> RunPage:
    """Runs newest first, keyset-paginated; filter by machine, channel, project, time, ..."""
    where = run_reads.RunFilter(
        machine, channel, trigger, tier, branch, commit, since, until, project
    )
    after = decode_cursor(cursor) if cursor else None
    runs = run_reads.list_runs(session, where, after, limit + 1)
    more = len(runs) > limit
    runs = runs[:limit]
    next_cursor = encode_cursor(runs[-1].started_at, runs[-1].id) if more else None
    return RunPage(items=[RunRead.model_validate(r) for r in runs], next_cursor=next_cursor)


@reads.get("/runs/{run_id}", response_model=RunDetail, responses=errors(404))
def get_run(
    run_id: RowId,
    session: SessionDep,
    results_limit: Annotated[
        int, Query(ge=1, le=RESULTS_PAGE, description="At most this many results")
    ] = RESULTS_PAGE,
    results_cursor: Annotated[
        str | None,
        Query(
            max_length=CURSOR_MAX_LENGTH,
            description="`results_next_cursor` of the previous answer: the next results",
        ),
    ] = None,
    samples: Annotated[
        bool,
        Query(
            description=(
                "Each result's raw samples (the default). With false, `samples` is null and "
                "`samples_count`, `samples_min` and `samples_max` summarise them: an answer of "
                "a few bytes a result"
            )
        ),
    ] = True,
) -> RunDetail:
    """One run with its results, ordered by case, at most `results_limit` of them.

    A run with more results answers `results_next_cursor`: pass it back as `results_cursor`
    for the next ones (`result_count` says how many there are in all). A page also ends where
    its results' samples, `extra` and `reason` would pass about 2 MiB (at least one result a
    page): a result of 50,000 samples is about 350 KB. With `samples=false` the page ends at
    the same place (the database reads the samples to summarise them), its answer a few bytes
    a result.
    """
    run = run_reads.get_run(session, run_id)
    offset = decode_offset(results_cursor, "results_cursor") if results_cursor else 0
    weights = run_reads.run_result_weights(session, run_id, offset=offset, limit=results_limit + 1)
    taken = within_bytes(weights, ANSWER_BYTES)
    rows = run_reads.list_run_results(session, run_id, offset=offset, limit=taken, samples=samples)
    shown = min(taken, results_limit)
    return RunDetail(
        **RunRead.model_validate(run).model_dump(),
        results=[_result(row) for row in rows[:shown]],
        results_next_cursor=encode_offset(offset + shown) if len(weights) > shown else None,
    )


def _result(row: dict[str, Any]) -> ResultRead:
    if row["samples"] is not None:  # shipped whole: the summary is read off them
        raw = row["samples"]
        row = {**row, "samples_count": len(raw), "samples_min": min(raw, default=None)}
        row["samples_max"] = max(raw, default=None)
    return ResultRead(**row)


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
            le=MAX_POINTS,
            description=(
                "Downsample to about this many points, keeping each bucket's first, last, "
                f"lowest, highest and first failed point (default and most: {MAX_POINTS}; "
                f"{MAX_SAMPLED_POINTS} with samples)"
            ),
        ),
    ] = None,
    include_samples: Annotated[
        bool,
        Query(description=f"Each point's raw samples too (at most {MAX_SAMPLED_POINTS} points)"),
    ] = False,
) -> SeriesPoints:
    """A series' points in a time range, oldest first, downsampled beyond `max_points`.

    A range of more than 100,000 points is refused (a 422): narrow it with `since` and `until`.
    """
    series = catalog.get_series(session, series_id)
    cap = min(max_points or MAX_POINTS, MAX_SAMPLED_POINTS if include_samples else MAX_POINTS)
    # A range of at most ``cap`` points, the usual one, is kept whole: one read.
    whole = min(cap, MAX_POINTS_READ)
    few = run_reads.series_points(
        session, series_id, since, until, whole + 1, samples=include_samples
    )
    if len(few) <= whole:
        return SeriesPoints(
            series=SeriesRead.model_validate(series),
            total=len(few),
            downsampled=False,
            points=[_point(row, row, include_samples) for row in few],
        )
    rows = run_reads.series_levels(session, series_id, since, until, MAX_POINTS_READ + 1)
    if len(rows) > MAX_POINTS_READ:
        raise InvalidInput(
            f"the range holds more than {MAX_POINTS_READ} points: narrow it with since and until"
        )
    keep = downsample_indices([r.value for r in rows], cap)
    kept = [rows[i] for i in keep]
    bands = run_reads.series_samples(
        session,
        series_id,
        [r.run_id for r in kept] if len(kept) < len(rows) else None,
        since,
        until,
        samples=include_samples,
    )
    points = [_point(row, bands.get(row.run_id), include_samples) for row in kept]
    return SeriesPoints(
        series=SeriesRead.model_validate(series),
        total=len(rows),
        downsampled=len(points) < len(rows),
        points=points,
    )


def _point(row: Any, band: Any, include_samples: bool) -> Point:
    return Point.model_construct(  # from stored, typed columns: nothing to validate
        run_id=row.run_id,
        measured_at=row.measured_at,
        status=row.status,
        value=row.value,
        text_value=row.text_value,
        commit=row.commit,
        samples_min=band and _number(band.samples_min),
        samples_max=band and _number(band.samples_max),
        samples=(band.samples or None) if band and include_samples else None,
    )


def _number(value: Any) -> float | None:
    # SQLite's json_each gives a whole sample as an integer.
    return None if value is None else float(value)
