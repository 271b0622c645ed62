"""Cron expressions as Celery beat reads them, and the minutes they fire at."""

import random
from datetime import UTC, datetime, timedelta, timezone

import pytest
from celery.schedules import crontab
from pydantic import ValidationError

from app.core.config import Settings
from app.core.cron import MAX_SPAN, CronError, fire_times, parse_cron

MONDAY = datetime(2026, 1, 5, tzinfo=UTC)  # a Monday


def test_fields_expand_like_celery() -> None:
    cron = parse_cron("*/20 0-23/12 1,15 jan-mar,12 fri-mon")
    assert cron.minutes == {0, 20, 40}
    assert cron.hours == {0, 12}
    assert cron.days_of_month == {1, 15}
    assert cron.months == {1, 2, 3, 12}
    assert cron.days_of_week == {5, 6, 0, 1}  # a range that ends below its start wraps
    assert parse_cron("0 22-2 * * sunday").hours == {22, 23, 0, 1, 2}
    assert parse_cron("0 0 * * sunday").days_of_week == {0}


def test_day_of_month_and_day_of_week_must_both_match() -> None:
    # Celery, unlike Vixie cron: the first Monday of the month, not days 1-7 and all Mondays.
    start = datetime(2026, 1, 31, tzinfo=UTC)
    fired = fire_times("0 3 1-7 * 1", start, start + MAX_SPAN)
    assert fired == [datetime(2026, 2, 2, 3, tzinfo=UTC)]


@pytest.mark.parametrize(
    ("cron", "message"),
    [
        ("0 */12 * *", "has 4 field"),
        ("0 */12 * * * *", "has 6 field"),
        ("0 2 * * 7", r"day of week 7 is out of range 0-6 \(Sunday is 0"),
        ("60 * * * *", "minute 60 is out of range 0-59"),
        ("0 24 * * *", "hour 24 is out of range 0-23"),
        ("0 0 0 * *", "day of month 0 is out of range 1-31"),
        ("0 0 * 13 *", "month 13 is out of range 1-12"),
        ("*/0 * * * *", "has a step of 0"),
        ("5/10 * * * *", "a step needs"),
        ("1-2-3 * * * *", "minute '1-2-3' is not"),
        ("1,,2 * * * *", "minute '' is not"),
        ("+5 * * * *", r"minute '\+5' is not"),
        ("jan * * * *", "minute 'jan' is not a number"),
        ("0 0 * * jan", "day of week 'jan' is not a number"),
        ("0 0 31 2,4 *", "never occurs in its months"),
    ],
)
def test_a_malformed_cron_is_refused_saying_what_is_wrong(cron: str, message: str) -> None:
    with pytest.raises(CronError, match=message):
        parse_cron(cron)


def test_fire_times_are_after_start_up_to_end_in_utc() -> None:
    start = MONDAY + timedelta(hours=12)  # a fire time: left out
    assert fire_times("0 */12 * * *", start, start + timedelta(days=1)) == [
        MONDAY + timedelta(hours=24),
        MONDAY + timedelta(hours=36),  # the end: included
    ]
    paris = timezone(timedelta(hours=1))
    local = datetime(2026, 1, 5, 3, 0, tzinfo=paris)  # 02:00 UTC
    assert fire_times("0 2 * * *", local - timedelta(minutes=1), local) == [
        MONDAY + timedelta(hours=2)
    ]
    assert fire_times("0 2 * * 1-5", MONDAY, MONDAY - timedelta(days=1)) == []
    weekdays = fire_times("30 6 * * 1-5", MONDAY, MONDAY + timedelta(days=14))
    assert [t.isoweekday() for t in weekdays] == [1, 2, 3, 4, 5] * 2


def test_fire_times_refuse_a_span_over_the_cap_and_naive_times() -> None:
    assert len(fire_times("* * * * *", MONDAY, MONDAY + MAX_SPAN)) == MAX_SPAN.days * 1440
    with pytest.raises(ValueError, match="at most 15 days"):
        fire_times("0 2 * * *", MONDAY, MONDAY + MAX_SPAN + timedelta(minutes=1))
    with pytest.raises(ValueError, match="aware"):
        fire_times("0 2 * * *", datetime(2026, 1, 5), datetime(2026, 1, 6))
    with pytest.raises(CronError):
        fire_times("0 2 * *", MONDAY, MONDAY + timedelta(days=1))


@pytest.mark.parametrize(
    "cron",
    [
        "0 */12 * * *",
        "30 6 * * 1-5",
        "*/15 3-5 * * *",
        "0 0 1-7 * 1",
        "5-2/2 22-3 * 11-2 5-1",
        "17 */5 */3 * *",
        "0 0 29 2 *",
        "45 23 31 * *",
        "0 9 * * sat,sun",
    ],
)
def test_fire_times_are_those_celery_beat_fires_at(cron: str) -> None:
    minute, hour, day_of_month, month, day_of_week = cron.split()
    beat = crontab(minute, hour, day_of_week, day_of_month, month)
    rng = random.Random(cron)
    for _ in range(20):
        start = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=rng.randrange(3 * 525600))
        end = start + MAX_SPAN
        expected, at = [], start
        while True:  # beat's next run after each of its runs
            last, delta, _ = beat.remaining_delta(at, tz="UTC")
            if (at := last + delta) > end:
                break
            expected.append(at)
        assert fire_times(cron, start, end) == expected


def test_a_schedule_beat_would_refuse_is_refused_at_load() -> None:
    with pytest.raises(ValidationError, match="day of week 7 is out of range"):
        Settings(SCHEDULES=[{"machine": "h100-a", "cron": "0 2 * * 7"}])
    assert Settings(SCHEDULES=[{"machine": "h100-a", "cron": "0 2 * * 0"}]).SCHEDULES
