"""A run's history: the runs of its place, and those before it that it is judged against."""

from typing import Any

from sqlalchemy import ColumnElement, Select, select

from app.runs.models import INVALID, Run


def place_runs(
    machine_id: int | ColumnElement[int],
    channel: str | None,
    project: str | None,
    *columns: Any,
    newest_first: bool = False,
    limit: int | None = None,
) -> Select[Any]:
    """The runs of a place in time order: oldest first, or ``newest_first``; at most ``limit``.

    A place is a machine, a channel and a project: another project's runs on the machine hold
    other models, never its history, and an invalidated run is in no history. A channel or
    project of None stands for every one (a machine's cadence counts all its projects' runs).
    Runs of one time are in id order, so a limit cuts the same runs on every read. The query
    selects ``columns`` (the runs when none; another table's columns with ``Run`` joined).
    """
    query = select(*(columns or (Run,))).where(Run.machine_id == machine_id, Run.status != INVALID)
    if channel is not None:
        query = query.where(Run.channel == channel)
    if project is not None:
        query = query.where(Run.project == project)
    order = (Run.started_at.desc(), Run.id.desc()) if newest_first else (Run.started_at, Run.id)
    return query.order_by(*order).limit(limit)


def earlier_runs(run: Run, limit: int, *, same_tier: bool = False) -> Select[int]:
    """The ids of up to ``limit`` runs of the run's place started before it, newest first.

    ``same_tier`` keeps to runs of the run's tier, which report the same cases.
    """
    query = place_runs(
        run.machine_id, run.channel, run.project, Run.id, newest_first=True, limit=limit
    ).where(Run.started_at < run.started_at)
    if same_tier:
        query = query.where(Run.tier == run.tier)
    return query
