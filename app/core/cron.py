"""Cron expressions as Celery beat reads them, and the minutes a schedule fires at (UTC).

``BENCHWATCH_SCHEDULES`` gives each machine a cron, ``minute hour day-of-month month
day-of-week``, that beat turns into ``celery.schedules.crontab`` (``workers.celery_app.cron``).
The silence sweep needs the same schedule without Celery: when was a machine due to run. This
module reads the subset of Celery's syntax a schedule needs, with Celery's meaning:

- each field is a comma-separated list of ``*``, ``*/n``, ``a``, ``a-b`` or ``a-b/n`` (ASCII
  numbers, steps of 1 or more); a range whose end is below its start wraps around (day of week
  ``5-1`` is Friday to Monday), as in Celery;
- minute 0-59, hour 0-23, day of month 1-31, month 1-12 (or ``jan``..``dec``), day of week
  0-6 with 0 = Sunday (or ``sun``..``sat``). Celery refuses day of week 7, so this module does
  too: a cron that beat would refuse must not be judged as if it ran;
- a minute fires when every field matches it. Unlike Vixie cron, a restricted day of month and a
  restricted day of week must *both* match (Celery: "any day on which execution should occur
  must be represented by entries in all three of the day and month attributes"), so
  ``0 0 1-7 * 1`` is the first Monday of the month, not the 1st to 7th and every Monday;
- a cron whose days of month never occur in its months (``0 0 31 2 *``) is refused, as Celery
  refuses it.

Celery also accepts a few spellings this module refuses, on purpose, because a schedule that
uses them is almost surely a typo: ``1-2-3`` (Celery reads ``1-2``), ``+5``, non-ASCII digits,
and month or day names in other fields (Celery reads ``jan`` in the minute field as 1).

Times are UTC: beat runs with ``timezone="UTC"``.
"""

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

# The longest span ``fire_times`` lists: a schedule firing every minute gives ~21,600 times
# in 15 days, which bounds the work of one call (the silence sweep asks for 14 days).
MAX_SPAN = timedelta(days=15)
MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
FULL_WEEKDAYS = ("sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday")
FULL_MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
# The longest month of each, February with its leap day (Celery's CRON_DAYS_IN_MONTH).
DAYS_IN_MONTH = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_PART = re.compile(r"(?P<range>\*|[A-Za-z0-9]+(?:-[A-Za-z0-9]+)?)(?:/(?P<step>[0-9]+))?")


class CronError(ValueError):
    """A cron expression Celery's crontab would refuse, or that this module does not read."""


@dataclass(frozen=True)
class FieldSpec:
    """One of the five fields: its name in messages, its bounds and its names, if any."""

    name: str
    low: int
    high: int
    names: dict[str, int]


FIELDS = (
    FieldSpec("minute", 0, 59, {}),
    FieldSpec("hour", 0, 23, {}),
    FieldSpec("day of month", 1, 31, {}),
    FieldSpec(
        "month",
        1,
        12,
        {n: i for i, n in enumerate(MONTHS, 1)} | {n: i for i, n in enumerate(FULL_MONTHS, 1)},
    ),
    FieldSpec(
        "day of week",
        0,
        6,
        {n: i for i, n in enumerate(WEEKDAYS)} | {n: i for i, n in enumerate(FULL_WEEKDAYS)},
    ),
)


@dataclass(frozen=True)
class Cron:
    """A parsed cron: the values of each field at which it fires."""

    text: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days_of_month: frozenset[int]
    months: frozenset[int]
    days_of_week: frozenset[int]  # 0 = Sunday

    def fires_on(self, day: date) -> bool:
        """Whether it fires at some minute of ``day`` (month, day of month and of week all)."""
        return (
            day.month in self.months
            and day.day in self.days_of_month
            and day.isoweekday() % 7 in self.days_of_week
        )


def parse_cron(text: str) -> Cron:
    """The cron of ``minute hour day-of-month month day-of-week`` (see the module's doc).

    Raises:
        CronError: not five fields, or a field Celery's crontab would refuse (the message
            names the field and what is wrong with it).
    """
    fields = text.split()
    if len(fields) != len(FIELDS):
        raise CronError(
            f"cron {text!r} has {len(fields)} field(s), not 5 "
            "(minute hour day-of-month month day-of-week)"
        )
    minutes, hours, days, months, weekdays = (
        _parse_field(value, spec, text) for value, spec in zip(fields, FIELDS, strict=True)
    )
    if not any(day <= DAYS_IN_MONTH[month - 1] for month in months for day in days):
        raise CronError(f"cron {text!r}: day of month {fields[2]!r} never occurs in its months")
    return Cron(text, minutes, hours, days, months, weekdays)


def _parse_field(value: str, spec: FieldSpec, text: str) -> frozenset[int]:
    """The values of one field: a union of its comma-separated parts."""
    found: set[int] = set()
    for part in value.split(","):
        match = _PART.fullmatch(part)
        if match is None:
            raise CronError(
                f"cron {text!r}: {spec.name} {part!r} is not *, a number, a range a-b, "
                "or one of them with a step /n"
            )
        values = _expand(match["range"], spec, text)
        if match["step"] is not None:
            step = int(match["step"])
            if step == 0:
                raise CronError(f"cron {text!r}: {spec.name} {part!r} has a step of 0")
            if match["range"] != "*" and "-" not in match["range"]:  # Celery refuses 5/10
                raise CronError(f"cron {text!r}: {spec.name} {part!r}: a step needs * or a-b")
            values = values[::step]
        found.update(values)
    return frozenset(found)


def _expand(token: str, spec: FieldSpec, text: str) -> list[int]:
    """``*``, ``a`` or ``a-b`` in order; a range whose end is below its start wraps around."""
    if token == "*":
        return list(range(spec.low, spec.high + 1))
    first, _, last = token.partition("-")
    start = _value(first, spec, text)
    if not last:
        return [start]
    end = _value(last, spec, text)
    if end >= start:
        return list(range(start, end + 1))
    return list(range(start, spec.high + 1)) + list(range(spec.low, end + 1))


def _value(token: str, spec: FieldSpec, text: str) -> int:
    """A number or a name of the field, within its bounds."""
    if token.isascii() and token.isdigit():
        number = int(token)
    elif token.lower() in spec.names:
        return spec.names[token.lower()]
    else:
        raise CronError(f"cron {text!r}: {spec.name} {token!r} is not a number")
    if not spec.low <= number <= spec.high:
        hint = " (Sunday is 0; Celery's crontab refuses 7)" if spec.name == "day of week" else ""
        raise CronError(
            f"cron {text!r}: {spec.name} {number} is out of range {spec.low}-{spec.high}{hint}"
        )
    return number


def fire_times(cron: Cron | str, start: datetime, end: datetime) -> list[datetime]:
    """The minutes the cron fires at after ``start`` and up to ``end`` included, in order (UTC).

    Args:
        cron: a parsed cron, or its text.
        start: aware; a fire time equal to it is left out (what fired *since* ``start``).
        end: aware, at most ``MAX_SPAN`` after ``start``.

    Raises:
        CronError: the text does not parse.
        ValueError: a naive time, or a span over ``MAX_SPAN``: the list would grow with it.
    """
    if start.tzinfo is None or end.tzinfo is None:
        raise ValueError("fire_times needs aware datetimes (UTC)")
    if end - start > MAX_SPAN:
        raise ValueError(f"fire_times lists at most {MAX_SPAN.days} days, not {end - start}")
    parsed = parse_cron(cron) if isinstance(cron, str) else cron
    start, end = start.astimezone(UTC), end.astimezone(UTC)
    hours, minutes = sorted(parsed.hours), sorted(parsed.minutes)
    found = []
    day = start.date()
    while day <= end.date():
        if parsed.fires_on(day):
            for hour in hours:
                for minute in minutes:
                    at = datetime(day.year, day.month, day.day, hour, minute, tzinfo=UTC)
                    if start < at <= end:
                        found.append(at)
        day += timedelta(days=1)
    return found
