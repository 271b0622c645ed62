"""Load the recent history of many series at once, for the detector."""

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Integer, Select, bindparam, func, select, true
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import Session

from app.core.bulk import is_postgres, member_of
from app.runs.models import Result

# What a point needs (series, run, status, value, spread) and what orders them (time, run).
_COLUMNS = (
    Result.series_id,
    Result.run_id,
    Result.status,
    Result.value,
    Result.spread,
    Result.measured_at,
)


@dataclass
class History:
    """One series' points in time order: value (NaN when not ok), run and within-run spread.

    ``spreads``: each point's stored ``Result.spread`` (NaN without samples or not ok).
    """

    values: list[float] = field(default_factory=list)
    run_ids: list[int] = field(default_factory=list)
    spreads: list[float] = field(default_factory=list)


def load_histories(
    session: Session, series_ids: Sequence[int], until: datetime, last: int | None
) -> dict[int, History]:
    """Each series' points measured up to ``until``: the newest ``last`` (None: all).

    Raw samples are not loaded (decoding them for every point of thousands of series is the
    slow part); ``load_samples`` fetches them for the few series where a step is found.
    """
    if last is not None and is_postgres(session):
        queries = [_newest_per_series_lateral(series_ids, until, last)]
    else:
        queries = [
            _newest_per_series_ranked(condition, until, last)
            for condition in member_of(session, Result.series_id, sorted(series_ids))
        ]
    histories: dict[int, History] = defaultdict(History)
    for query in queries:
        for series_id, run_id, status, value, spread in session.connection().execute(query):
            history = histories[series_id]
            ok = status == "ok"
            history.values.append(value if ok and value is not None else math.nan)
            history.run_ids.append(run_id)
            history.spreads.append(spread if ok and spread is not None else math.nan)
    return dict(histories)


def _newest_per_series_lateral(
    series_ids: Sequence[int], until: datetime, last: int
) -> Select[Any]:
    """Postgres: per series, an index scan that stops after ``last`` rows.

    LATERAL ... LIMIT keeps the cost independent of how long the histories are.
    """
    ids = (
        func.unnest(bindparam("series_ids", list(series_ids), type_=postgresql.ARRAY(Integer)))
        .table_valued("id")
        .render_derived()
    )
    newest = (
        select(*_COLUMNS)
        .where(Result.series_id == ids.c.id, Result.measured_at <= until)
        .order_by(Result.measured_at.desc(), Result.run_id.desc())
        .limit(last)
        .lateral()
    )
    return (
        select(
            newest.c.series_id, newest.c.run_id, newest.c.status, newest.c.value, newest.c.spread
        )
        .select_from(ids)
        .join(newest, true())
        .order_by(newest.c.series_id, newest.c.measured_at, newest.c.run_id)
    )


def _newest_per_series_ranked(
    condition: ColumnElement[bool], until: datetime, last: int | None
) -> Select[Any]:
    """Any dialect: number each series' rows newest first and keep the first ``last``."""
    newest_first = func.row_number().over(
        partition_by=Result.series_id, order_by=(Result.measured_at.desc(), Result.run_id.desc())
    )
    ranked = (
        select(*_COLUMNS, newest_first.label("age"))
        .where(condition, Result.measured_at <= until)
        .subquery()
    )
    columns = ("series_id", "run_id", "status", "value", "spread")
    query = select(*(ranked.c[name] for name in columns))
    if last is not None:
        query = query.where(ranked.c.age <= last)
    return query.order_by(ranked.c.series_id, ranked.c.measured_at, ranked.c.run_id)


def load_samples(session: Session, series_id: int, run_ids: Sequence[int]) -> list[Any]:
    """The raw samples of one series' points in these runs (None where absent or not ok)."""
    query = select(Result.run_id, Result.status, Result.samples).where(
        Result.series_id == series_id, Result.run_id.in_(run_ids)
    )
    found = {
        run_id: samples if status == "ok" else None
        for run_id, status, samples in session.connection().execute(query)
    }
    return [found.get(run_id) for run_id in run_ids]
