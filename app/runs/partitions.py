"""Postgres: the monthly partitions of ``result``, made ahead of the rows that need them.

``result`` is partitioned by range of ``measured_at``, one partition a month (migration
``7d4f2b9c1e60``), with a DEFAULT partition that takes a row of a month without one, so an
upload never fails for want of a partition. The daily upkeep makes this month's and the next
``MONTHS_AHEAD`` months' partitions, and gives each month found in the DEFAULT partition
within the months kept partitioned (``BENCHWATCH_PARTITION_MONTHS_BACK``) one of its own,
moving its rows there, at most ``BENCHWATCH_PARTITIONS_PER_PASS`` a pass: reads of a month
touch that month only. Outliers (history imported from long ago, a clock far off) stay in
the DEFAULT partition.

SQLite, and a Postgres ``result`` that is not partitioned, have nothing to keep up.
"""

import logging
from collections.abc import Iterable
from datetime import UTC, date, datetime

from sqlalchemy import text
from sqlalchemy.orm import Session

from app.core.bulk import is_postgres

log = logging.getLogger(__name__)
MONTHS_AHEAD = 3
TABLE = "result"
DEFAULT_PARTITION = "result_default"
# Creating a partition locks ``result`` briefly; waiting behind a long read would hold every
# upload and read queued behind it, so the upkeep gives up instead and tries the next day.
LOCK_TIMEOUT = "5s"


def month_of(moment: datetime | date) -> date:
    """The first day of the UTC month of ``moment``."""
    if isinstance(moment, datetime):
        moment = moment.astimezone(UTC) if moment.tzinfo else moment
    return date(moment.year, moment.month, 1)


def add_months(month: date, count: int) -> date:
    """The first day of the month ``count`` months after ``month``'s."""
    index = month.year * 12 + month.month - 1 + count
    return date(index // 12, index % 12 + 1, 1)


def partition_name(month: date) -> str:
    """The name of ``month``'s partition: ``result_y2026m12``."""
    return f"{TABLE}_y{month.year:04d}m{month.month:02d}"


def is_partitioned(session: Session) -> bool:
    """Whether ``result`` is a partitioned table (Postgres after the migration)."""
    if not is_postgres(session):
        return False
    kind = session.execute(
        text("SELECT relkind FROM pg_class WHERE oid = to_regclass(:table)"), {"table": TABLE}
    ).scalar()
    return kind == "p"


def keep_up(
    session: Session,
    now: datetime | None = None,
    per_pass: int = 24,
    months_back: int = 120,
) -> list[str]:
    """Make the partitions of this month, the next ``MONTHS_AHEAD``, and of rows in DEFAULT.

    At most ``per_pass`` partitions a pass (the months ahead first, then the strays' newest
    first; the rest on the next passes), and none for a month more than ``months_back``
    months before this one or past the months ahead: such outliers (history an admin
    imported from long ago, a clock far off) stay in the DEFAULT partition, so that no upload
    makes a partition a month and every query plans and locks a bounded number of them.
    Returns the partitions made (none when all existed, or ``result`` is not partitioned).
    """
    if not is_partitioned(session):
        return []
    this_month = month_of(now or datetime.now(UTC))
    ahead = [add_months(this_month, i) for i in range(MONTHS_AHEAD + 1)]
    earliest, last = add_months(this_month, -months_back), ahead[-1]
    stray = session.execute(
        text(
            f"SELECT DISTINCT date_trunc('month', measured_at AT TIME ZONE 'UTC')::date "
            f"FROM {DEFAULT_PARTITION}"
        )
    ).scalars()
    kept = sorted((m for m in set(stray) - set(ahead) if earliest <= m <= last), reverse=True)
    existing = _existing(session)
    wanted = [m for m in [*ahead, *kept] if partition_name(m) not in existing]
    if len(wanted) > per_pass:
        log.info("%d partitions to make: %d now, the rest next time", len(wanted), per_pass)
    return ensure_months(session, wanted[:per_pass])


def _existing(session: Session) -> set[str]:
    """The names of ``result``'s partitions."""
    return set(
        session.execute(
            text(
                "SELECT relid::text FROM pg_partition_tree(CAST(:table AS regclass)) "
                "WHERE level > 0"
            ),
            {"table": TABLE},
        ).scalars()
    )


def ensure_months(session: Session, months: Iterable[date]) -> list[str]:
    """Give each of ``months`` a partition if it has none; the rows of it in DEFAULT move there.

    In the session's transaction (the caller commits). Returns the partitions made.
    """
    existing = _existing(session)
    made = []
    session.execute(text(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'"))
    for month in sorted({month_of(m) for m in months}):
        name = partition_name(month)
        if name in existing:
            continue
        bounds = {
            "start": f"{month.isoformat()} 00:00+00",
            "end": f"{add_months(month, 1)} 00:00+00",
        }
        # A new partition may not overlap rows the DEFAULT partition holds: they step aside
        # for the moment, in this transaction, and move into the new partition.
        session.execute(
            text(
                "CREATE TEMPORARY TABLE stray_results ON COMMIT DROP AS "
                f"WITH moved AS (DELETE FROM {DEFAULT_PARTITION} WHERE measured_at >= "
                "CAST(:start AS timestamptz) AND measured_at < CAST(:end AS timestamptz) "
                "RETURNING *) SELECT * FROM moved"
            ),
            bounds,
        )
        start, end = bounds["start"], bounds["end"]  # DDL takes no parameters; ours are dates
        session.execute(
            text(
                f"CREATE TABLE {name} PARTITION OF {TABLE} FOR VALUES FROM ('{start}') TO ('{end}')"
            )
        )
        moved = session.execute(text(f"INSERT INTO {TABLE} SELECT * FROM stray_results"))
        session.execute(text("DROP TABLE stray_results"))
        moved_rows = moved.rowcount  # type: ignore[attr-defined]
        log.info("made partition %s (%d rows moved from the default one)", name, moved_rows)
        made.append(name)
    return made
