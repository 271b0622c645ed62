"""Postgres: ``result`` becomes a table partitioned by month of ``measured_at``.

A year of a large platform is tens of millions of results. Partitioned by month, a read of a
series' recent history touches the few partitions its time window names, each index stays
the size of one month, and dropping old months never rewrites the rest. SQLite is unchanged.

A partitioned table's primary key must hold its partition key: it becomes (run_id,
series_id, measured_at). Every result of a run is written with the run's time (a further
shard of the run skips the series the run holds already, under the run's row lock), so
(run_id, series_id) stays unique in practice; ingest has never relied on a conflict on it.

The partitions: one per month the rows fall in, this month and the next three; a DEFAULT
partition takes a row of any other month, so an ingest never fails for want of one, and the
daily upkeep (``app.runs.partitions``) makes the months ahead and moves such rows out.

(JIT is turned off per connection by the engine, ``app.core.db``: the planner's sums
over the partitions cross ``jit_above_cost`` for reads of milliseconds.)

Revision ID: 7d4f2b9c1e60
Revises: 5c8e1a7d3b42
Create Date: 2026-12-03 13:50:00.000000
"""

from collections.abc import Sequence
from datetime import UTC, datetime

from alembic import op
from sqlalchemy import text

revision: str = "7d4f2b9c1e60"
down_revision: str | None = "5c8e1a7d3b42"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MONTHS_AHEAD = 3  # as app.runs.partitions.MONTHS_AHEAD (a migration keeps its own copy)


def _month(year: int, month: int) -> tuple[int, int]:
    return (year + (month - 1) // 12, (month - 1) % 12 + 1)


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("ALTER TABLE result RENAME TO result_unpartitioned")
    op.execute("ALTER TABLE result_unpartitioned RENAME CONSTRAINT pk_result TO pk_result_old")
    op.execute("ALTER INDEX ix_result_series_id_measured_at RENAME TO ix_result_old_series")
    op.execute(
        "CREATE TABLE result (LIKE result_unpartitioned INCLUDING DEFAULTS INCLUDING "
        "CONSTRAINTS) PARTITION BY RANGE (measured_at)"
    )
    op.execute(
        "ALTER TABLE result ADD CONSTRAINT pk_result PRIMARY KEY (run_id, series_id, measured_at)"
    )
    op.execute("CREATE INDEX ix_result_series_id_measured_at ON result (series_id, measured_at)")
    op.execute("CREATE TABLE result_default PARTITION OF result DEFAULT")
    found = op.get_bind().execute(
        text(
            "SELECT DISTINCT extract(year FROM m)::int, extract(month FROM m)::int FROM "
            "(SELECT date_trunc('month', measured_at AT TIME ZONE 'UTC') AS m "
            "FROM result_unpartitioned) AS months"
        )
    )
    now = datetime.now(UTC)
    months = {(int(y), int(m)) for y, m in found}
    months |= {_month(now.year, now.month + i) for i in range(MONTHS_AHEAD + 1)}
    for year, month in sorted(months):
        after = _month(year, month + 1)
        op.execute(
            f"CREATE TABLE result_y{year:04d}m{month:02d} PARTITION OF result FOR VALUES "
            f"FROM ('{year:04d}-{month:02d}-01 00:00+00') "
            f"TO ('{after[0]:04d}-{after[1]:02d}-01 00:00+00')"
        )
    op.execute("INSERT INTO result SELECT * FROM result_unpartitioned")
    op.execute("DROP TABLE result_unpartitioned")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("ALTER TABLE result RENAME TO result_partitioned")
    op.execute("ALTER TABLE result_partitioned RENAME CONSTRAINT pk_result TO pk_result_old")
    op.execute("ALTER INDEX ix_result_series_id_measured_at RENAME TO ix_result_old_series")
    op.execute(
        "CREATE TABLE result (LIKE result_partitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS)"
    )
    op.execute("INSERT INTO result SELECT * FROM result_partitioned")
    op.execute("ALTER TABLE result ADD CONSTRAINT pk_result PRIMARY KEY (run_id, series_id)")
    op.execute("CREATE INDEX ix_result_series_id_measured_at ON result (series_id, measured_at)")
    op.execute("DROP TABLE result_partitioned")  # and its partitions
