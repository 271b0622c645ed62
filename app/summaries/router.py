"""Dashboard aggregates per suite x config x precision, and run-vs-run comparison."""

from typing import Annotated, Any

from fastapi import APIRouter, Query

from app.api.deps import ProjectQuery, ReadAccess, SessionDep
from app.api.responses import READS, errors
from app.api.validation import ApiRoute
from app.core.bounds import RowId
from app.core.errors import InvalidInput
from app.core.pagination import within_bytes
from app.runs.reads import get_run
from app.summaries import service
from app.summaries.schemas import (
    CaseConfidence,
    Comparison,
    ComparisonRow,
    GeomeanRead,
    GroupSummary,
    RunRef,
    Summary,
)

# The rows one comparison answers at most: a run may hold 100,000 results, each a row here.
COMPARE_PAGE = 5_000
MAX_OFFSET = 2 * 100_000  # two runs of the most results an upload may hold, none in common
# About the bytes of stored ``params`` one page may ship (each row repeats its case's): a case's
# params are any JSON object an upload may hold, so a page of big ones ends early.
ANSWER_BYTES = 2 * 2**20

router = APIRouter(
    tags=["summaries"], dependencies=[ReadAccess], route_class=ApiRoute, responses=READS
)


@router.get("/summary", response_model=Summary, responses=errors(404))
def get_summary(
    session: SessionDep,
    machine: Annotated[str | None, Query(description="machine name, e.g. h100-8")] = None,
    channel: str | None = None,
    run_id: Annotated[RowId | None, Query(description="default: the machine's newest run")] = None,
    base_run_id: Annotated[RowId | None, Query(description="a run to compare with")] = None,
    common_only: Annotated[
        bool, Query(description=("aggregate only over models present in both runs"))
    ] = False,
    project: ProjectQuery = None,
) -> Summary:
    """Pass rate, geomean speedup, mean compile time and compression ratio per group.

    With a machine, its newest run (of `channel` and `project`, when given) is summarised.
    """
    if run_id is not None:
        run = get_run(session, run_id)
    elif machine is not None:
        run = service.latest_run(session, machine, channel, project)
    else:
        raise InvalidInput("give a machine (its newest run is summarised) or a run_id")
    base = get_run(session, base_run_id) if base_run_id is not None else None
    groups = service.summarize_runs(session, run, base, common_only)
    return Summary(
        machine=run.machine.name,
        run=RunRef.model_validate(run),
        base_run=RunRef.model_validate(base) if base else None,
        common_only=common_only,
        groups=[GroupSummary.model_validate(g, from_attributes=True) for g in groups],
    )


@router.get("/compare", response_model=Comparison, responses=errors(404))
def compare_runs(
    session: SessionDep,
    base_run_id: RowId,
    new_run_id: RowId,
    suite: str | None = None,
    config: str | None = None,
    precision: str | None = None,
    mode: str | None = None,
    metric: str | None = None,
    threshold: Annotated[
        float, Query(ge=0, lt=1, description="relative change counted as a move")
    ] = 0.05,
    limit: Annotated[
        int, Query(ge=1, le=COMPARE_PAGE, description="At most this many rows")
    ] = COMPARE_PAGE,
    offset: Annotated[
        int,
        Query(ge=0, le=MAX_OFFSET, description="Rows to skip: the next page's is offset + limit"),
    ] = 0,
    base_config: Annotated[
        str | None, Query(description="config against config: the base run's config")
    ] = None,
    new_config: Annotated[
        str | None,
        Query(description="... against this config of the new run (may be the same run)"),
    ] = None,
    stats: Annotated[
        bool,
        Query(
            description="how sure each change is, from the samples (one metric, at most 300 "
            "cases): interval, p-value, effect size, verdict; and the geomean's interval"
        ),
    ] = False,
) -> Comparison:
    """Per benchmark and metric: base value, new value, relative change and a verdict.

    In case order, at most `limit` rows from `offset` (`total` says how many there are). A page
    also ends where its rows' `params` (as stored) would pass about 2 MiB (at least one row a
    page): `next_offset` says where the next page starts, null after the last.
    Runs compare machine against machine or release line against release line (each one's
    run); `base_config` and `new_config` compare config against config, in one run (the same
    id twice) or two, the cases matched without their config.
    """
    where = service.CompareFilter(suite, config, precision, mode, metric)
    configs = _configs(base_config, new_config, config)
    compared = service.compare_runs(
        session, base_run_id, new_run_id, where, threshold, stats, configs
    )
    rows = compared.rows
    page = rows[offset : offset + limit]
    shown = within_bytes([row.pop("weight") for row in page], ANSWER_BYTES)
    after = offset + shown
    return Comparison(
        base_run=RunRef.model_validate(get_run(session, base_run_id)),
        new_run=RunRef.model_validate(get_run(session, new_run_id)),
        threshold=threshold,
        total=len(rows),
        offset=offset,
        limit=limit,
        next_offset=after if after < len(rows) else None,
        rows=[_row(row) for row in page[:shown]],
        geomean=_geomean(compared),
    )


def _configs(base: str | None, new: str | None, config: str | None) -> tuple[str, str] | None:
    """Config against config: both configs or neither, and then no ``config`` filter."""
    if base is None and new is None:
        return None
    if base is None or new is None or config is not None:
        where = "query.config" if config is not None else "query.new_config"
        raise InvalidInput(
            "config against config takes base_config and new_config together, without config",
            errors=[{"loc": where, "field": where.split(".")[1], "message": "both or neither"}],
        )
    return base, new


def _row(row: dict[str, Any]) -> ComparisonRow:
    found = row.pop("confidence", None)
    sure = None if found is None else CaseConfidence.model_validate(found, from_attributes=True)
    return ComparisonRow(**row, confidence=sure)


def _geomean(compared: service.Compared) -> GeomeanRead | None:
    if compared.geomean is None:
        return None
    mean = compared.geomean
    return GeomeanRead(ratio=mean.ratio, count=mean.count, interval=compared.interval)
