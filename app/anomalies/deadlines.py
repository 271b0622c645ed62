"""Triage deadlines in working days, as Perfherder's sheriffs keep them.

A finding is due for triage ``TRIAGE_DAYS`` working days after it was found (Perfherder: two),
and, once acknowledged, due a bug link ``BUG_DAYS`` working days after it was found (four). It
is *overdue* when still ``new`` past the first, or acknowledged without a bug link past the
second. Working days are Monday to Friday: time found on a weekend starts counting on the
Monday, so that a finding found later is never due earlier.

``overdue_before`` turns "overdue now" into a time the database can compare ``created_at``
with: a finding is overdue (for that deadline) exactly when it was found at or before it.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

TRIAGE_DAYS = 2
BUG_DAYS = 4
DAY = timedelta(days=1)
WEEKEND = (5, 6)  # Saturday, Sunday


class Configured(Protocol):
    """Settings that say the deadlines (``core.config.Settings`` does)."""

    TRIAGE_DAYS: int
    BUG_DAYS: int


@dataclass(frozen=True)
class Deadlines:
    """How many working days triage and a bug link may take (``BENCHWATCH_TRIAGE_DAYS``...)."""

    triage_days: int = TRIAGE_DAYS
    bug_days: int = BUG_DAYS

    @classmethod
    def of(cls, settings: Configured) -> "Deadlines":
        """The deadlines the server is configured with."""
        return cls(settings.TRIAGE_DAYS, settings.BUG_DAYS)


def add_working_days(start: datetime, days: int) -> datetime:
    """``days`` working days after ``start`` (a weekend start counts from Monday 00:00)."""
    moment = start
    if moment.weekday() in WEEKEND:
        moment = (moment + DAY * (7 - moment.weekday())).replace(
            hour=0, minute=0, second=0, microsecond=0
        )
    counted = 0
    while counted < days:
        moment += DAY
        if moment.weekday() not in WEEKEND:
            counted += 1
    return moment


def overdue_before(now: datetime, days: int) -> datetime:
    """The latest time a finding may have been found and be past ``days`` working days now.

    ``add_working_days`` never decreases as its start grows, so the latest start whose
    deadline has passed is found by halving a window that holds it (to the microsecond).
    """
    low = now - DAY * (days + 3) * 7 // 5 - 3 * DAY  # its deadline has passed, surely
    high = now  # its deadline is days ahead, surely (days >= 1), or now (days == 0)
    if add_working_days(high, days) <= now:
        return high
    while high - low > timedelta(microseconds=1):
        middle = low + (high - low) / 2
        if add_working_days(middle, days) <= now:
            low = middle
        else:
            high = middle
    return low


DEFAULT = Deadlines()


def overdue(
    status: str, bug_url: str, created_at: datetime, now: datetime, rules: Deadlines = DEFAULT
) -> str:
    """``triage`` or ``bug`` when a finding is past that deadline now; "" when it is not."""
    if status == "new" and add_working_days(created_at, rules.triage_days) <= now:
        return "triage"
    late = add_working_days(created_at, rules.bug_days) <= now
    if status == "acknowledged" and not bug_url and late:
        return "bug"
    return ""
