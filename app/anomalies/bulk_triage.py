"""Triage many findings at once: picked by hand, or every one a filter matches.

Each row is triaged as ``triage.triage`` triages one (its fields, who and when, its audit
record, what sensitivity learns), in one transaction: a refused row (another project's, or one
that does not exist) refuses them all. At most ``MAX_ROWS`` rows a request; a filter that
matches more is a 422 that says how many it matched.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.anomalies import triage
from app.anomalies.models import AlertGroup, Regression
from app.anomalies.schemas import TriageUpdate
from app.core.errors import InvalidInput

MAX_ROWS = 500

KINDS: dict[str, triage.TriageKind[Any]] = {
    "regressions": triage.REGRESSION,
    "failures": triage.FAILURE,
    "aggregates": triage.AGGREGATE,
    "groups": triage.GROUP,
}


@dataclass(frozen=True)
class GroupFilter:
    """The alert group listing's filters; None means any."""

    status: str | None = None
    machine: str | None = None
    channel: str | None = None
    since: datetime | None = None
    project: str | None = None


@dataclass(frozen=True)
class Picked:
    """The rows of each kind a bulk triage changes, by id."""

    ids: dict[str, list[int]] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """How many rows in all."""
        return sum(len(found) for found in self.ids.values())


def by_filter(
    session: Session,
    regressions: triage.RegressionFilter | None = None,
    groups: GroupFilter | None = None,
) -> Picked:
    """Every regression (or alert group) a listing's filter matches; a 422 past ``MAX_ROWS``."""
    if regressions is not None:
        query = triage.regressions_query(regressions).with_only_columns(Regression.id)
        query, kind = query.order_by(Regression.id), "regressions"
    elif groups is not None:
        query = triage.groups_query(
            groups.status, groups.machine, groups.channel, groups.since, groups.project
        ).with_only_columns(AlertGroup.id)
        kind = "groups"
    else:
        raise InvalidInput("give the ids to triage, or a filter")
    found = list(session.scalars(query.limit(MAX_ROWS + 1)))
    if len(found) > MAX_ROWS:
        counted = session.scalar(select(func.count()).select_from(query.subquery()))
        raise InvalidInput(
            f"the filter matches {counted} {kind}: triage at most {MAX_ROWS} at once; narrow it",
            errors=[{"loc": "body.filter", "field": "filter", "message": "matches too many"}],
        )
    return Picked({kind: found})


def check_size(picked: Picked) -> None:
    """A 422 for nothing to triage, or more than ``MAX_ROWS``."""
    if not 0 < picked.total <= MAX_ROWS:
        raise InvalidInput(
            f"{picked.total} findings picked: triage 1 to {MAX_ROWS} at once",
            errors=[{"loc": "body", "field": "ids", "message": f"1 to {MAX_ROWS} findings"}],
        )


def apply(
    session: Session,
    picked: Picked,
    update: TriageUpdate,
    by: str,
    allowed: Callable[[Any, str], None],
) -> dict[str, list[int]]:
    """Triage every picked row with ``update``, as one would be; the ids changed per kind.

    ``allowed(row, loc)`` raises for a row the caller may not triage (another project's): it
    is called for every row before any is changed.
    """
    check_size(picked)
    rows = {
        kind: [triage.find(session, KINDS[kind], row_id) for row_id in ids]
        for kind, ids in picked.ids.items()
    }
    for kind, found in rows.items():
        for index, row in enumerate(found):
            allowed(row, f"body.ids.{kind}[{index}]")
    for kind, found in rows.items():
        for row in found:
            triage.triage(session, KINDS[kind], row.id, update, by)
    return {kind: [row.id for row in found] for kind, found in rows.items()}


def ids_of(picked: dict[str, Sequence[int]]) -> Picked:
    """Ids by kind as given, each once, kinds without any left out."""
    return Picked({kind: list(dict.fromkeys(ids)) for kind, ids in picked.items() if ids})
