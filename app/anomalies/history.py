"""Load the recent history of many series at once, for the detector."""

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.core.bulk import member_of
from app.runs.models import Result


@dataclass
class History:
    """One series' points in time order: value (NaN when not ok), run and raw samples."""

    values: list[float] = field(default_factory=list)
    run_ids: list[int] = field(default_factory=list)
    samples: list[list[float] | None] = field(default_factory=list)


def load_histories(
    session: Session, series_ids: Sequence[int], until: datetime, last: int | None
) -> dict[int, History]:
    """Each series' points measured up to ``until``: the newest ``last`` (None: all)."""
    histories: dict[int, History] = defaultdict(History)
    for condition in member_of(session, Result.series_id, sorted(series_ids)):
        newest_first = func.row_number().over(
            partition_by=Result.series_id, order_by=(Result.measured_at.desc(), Result.id.desc())
        )
        ranked = (
            select(
                Result.series_id,
                Result.run_id,
                Result.measured_at,
                Result.id,
                Result.status,
                Result.value,
                Result.samples,
                newest_first.label("age"),
            )
            .where(condition, Result.measured_at <= until)
            .subquery()
        )
        query = select(ranked)
        if last is not None:
            query = query.where(ranked.c.age <= last)
        query = query.order_by(ranked.c.series_id, ranked.c.measured_at, ranked.c.id)
        for row in session.connection().execute(query):
            history = histories[row.series_id]
            ok = row.status == "ok" and row.value is not None
            history.values.append(row.value if ok else math.nan)
            history.run_ids.append(row.run_id)
            history.samples.append(row.samples if ok else None)
    return dict(histories)
