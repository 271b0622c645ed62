"""Alert quality: the figures a team manages sheriffing by, over the last weeks.

- **Findings per week, by kind**: steps by direction (regression, improvement, noise,
  bimodal), failing cases, coverage changes, aggregate drops, silent machines; weeks start
  on Monday (UTC). Counted per day in SQL, folded into weeks here.
- **Time to triage** and **time to fix**, median and p90 in hours, per alert group (the unit
  people triage): from when it was found to its findings' first triage by a person, and to
  the triage that marked one fixed (a finding keeps its latest triage time: one triaged
  again counts from then).
- **The share marked invalid** per suite, config and detector (``sensitivity.label_shares``).
- **Localization outcomes**: localizations started in the window, by state.
- **Overdue**: groups past a triage deadline now.

Every read is bounded: at most ``MAX_WEEKS`` weeks, a count per day and kind, the newest
``MAX_TIMES`` triage times.
"""

from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

import numpy as np
from sqlalchemy import and_, case, func, select
from sqlalchemy.orm import Session

from app.anomalies import sensitivity, triage
from app.anomalies.deadlines import Deadlines
from app.anomalies.models import (
    AggregateFinding,
    AlertGroup,
    CaseFailure,
    MachineSilence,
    Regression,
)
from app.anomalies.sensitivity import AUTOMATIC
from app.core.db import utcnow
from app.localization.models import Localization

MAX_WEEKS = 52
MAX_TIMES = 5000
SHARES_BY = ("suite", "config", "detector")


@dataclass(frozen=True)
class Durations:
    """How long something took, in hours, over ``count`` findings (None without any)."""

    count: int
    median_h: float | None
    p90_h: float | None

    @classmethod
    def of(cls, hours: list[float]) -> "Durations":
        """The median and 90th percentile of ``hours``."""
        if not hours:
            return cls(0, None, None)
        values = np.asarray(hours)
        return cls(len(hours), float(np.median(values)), float(np.percentile(values, 90)))


def week_of(day: date) -> date:
    """The Monday that starts a day's week."""
    return day - timedelta(days=day.weekday())


def quality(
    session: Session, weeks: int, rules: Deadlines, now: datetime | None = None
) -> dict[str, Any]:
    """The figures over the last ``weeks`` weeks (1 to ``MAX_WEEKS``) up to ``now``."""
    now = now or utcnow()
    first_week = week_of(now.date()) - timedelta(weeks=weeks - 1)
    since = datetime.combine(first_week, datetime.min.time(), tzinfo=now.tzinfo)
    to_triage, to_fix = _times(session, since)
    return {
        "weeks": [str(first_week + timedelta(weeks=k)) for k in range(weeks)],
        "since": since,
        "per_week": _per_week(session, since, first_week, weeks),
        "time_to_triage": Durations.of(to_triage).__dict__,
        "time_to_fix": Durations.of(to_fix).__dict__,
        "invalid_share": {by: sensitivity.label_shares(session, by) for by in SHARES_BY},
        "localizations": _localizations(session, since),
        "overdue": _overdue(session, rules, now),
    }


def _per_week(session: Session, since: datetime, first: date, weeks: int) -> dict[str, list[int]]:
    """Findings found per week, by kind (a list a kind, a count a week)."""
    per_day: Counter[tuple[str, date]] = Counter()

    def count(kind: str | Any, created: Any, *where: Any) -> None:
        """``kind``: a column (a count per value) or the name of all the rows counted."""
        day = func.date(created)
        grouped = [day] if isinstance(kind, str) else [kind, day]
        query = select(*grouped, func.count()).where(created >= since, *where).group_by(*grouped)
        for row in session.execute(query):
            name = kind if isinstance(kind, str) else str(row[0])
            per_day[(name, _as_date(row[-2]))] += row[-1]

    count(Regression.direction, Regression.created_at)
    coverage = CaseFailure.failure.in_(CaseFailure.COVERAGE)
    count("failure", CaseFailure.created_at, ~coverage)
    count("coverage", CaseFailure.created_at, coverage)
    count("aggregate", AggregateFinding.created_at)
    count("machine_silent", MachineSilence.created_at)
    series: dict[str, list[int]] = defaultdict(lambda: [0] * weeks)
    for (kind, day), n in per_day.items():
        index = (week_of(day) - first).days // 7
        if 0 <= index < weeks:
            series[kind][index] += n
    return dict(sorted(series.items()))


def _as_date(value: Any) -> date:
    """A database's date (Postgres gives a date, SQLite its text)."""
    return value if isinstance(value, date) else date.fromisoformat(str(value)[:10])


def _times(session: Session, since: datetime) -> tuple[list[float], list[float]]:
    """Per group found in the window, hours to its first triage by a person and to its fix.

    A group is the unit people triage (Perfherder's alert summary): its first triage is its
    findings' earliest, its fix the latest triage of a finding marked fixed. Counted in SQL
    per group, over the newest ``MAX_TIMES`` groups.
    """
    groups = dict(
        session.execute(
            select(AlertGroup.id, AlertGroup.created_at)
            .where(AlertGroup.created_at >= since)
            .order_by(AlertGroup.id.desc())
            .limit(MAX_TIMES)
        ).all()
    )
    first: dict[int, datetime] = {}
    fixed: dict[int, datetime] = {}
    for model in (Regression, CaseFailure, AggregateFinding, MachineSilence):
        by_person = and_(*(~model.triaged_by.startswith(prefix) for prefix in AUTOMATIC))
        fixed_at = case((model.status == "fixed", model.triaged_at), else_=None)
        query = (
            select(model.group_id, func.min(model.triaged_at), func.max(fixed_at))
            .where(model.group_id.in_(list(groups)), model.status != "new")
            .where(model.triaged_at.is_not(None), by_person)
            .group_by(model.group_id)
        )
        for group_id, earliest, latest_fix in session.execute(query) if groups else []:
            first[group_id] = min(first.get(group_id, earliest), earliest)
            if latest_fix is not None:
                fixed[group_id] = max(fixed.get(group_id, latest_fix), latest_fix)

    def hours(moments: dict[int, datetime]) -> list[float]:
        return [max((at - groups[g]).total_seconds(), 0.0) / 3600 for g, at in moments.items()]

    return hours(first), hours(fixed)


def _localizations(session: Session, since: datetime) -> dict[str, int]:
    query = (
        select(Localization.state, func.count())
        .where(Localization.requested_at >= since)
        .group_by(Localization.state)
    )
    return {str(state): int(n) for state, n in session.execute(query)}


def _overdue(session: Session, rules: Deadlines, now: datetime) -> int:
    """Groups past a triage deadline now."""
    overdue = triage.Overdue.now(rules, now)
    query = triage.groups_query(None, None, None, None, None, overdue)
    ids = query.with_only_columns(AlertGroup.id).order_by(None).subquery()
    return session.scalar(select(func.count()).select_from(ids)) or 0
