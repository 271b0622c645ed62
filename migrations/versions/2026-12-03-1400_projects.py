"""Projects: a run's project, series kept apart per project, tokens limited to one.

``run.project`` and ``series.project`` default to ``default`` (every existing row is the
default project's), and a series is unique per benchmark, metric, machine, channel and
project. ``api_token.project`` (NULL: every project) limits a token's writes.

SQLite recreates ``series`` to change its unique constraint, which drops its catalog
generation triggers (migration ``9d1f4c2b7e60``); they are made again here, now with
``project`` among the columns whose update changes the token (on Postgres too).

Revision ID: 6d2f9b4e8a17
Revises: 7d4f2b9c1e60
Create Date: 2026-12-03 14:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "6d2f9b4e8a17"
down_revision: str | None = "7d4f2b9c1e60"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_KEY = ["benchmark_id", "metric_id", "machine_id", "channel"]
NEW_KEY = [*OLD_KEY, "project"]
NEW_TOKEN = {
    "postgresql": "md5(random()::text || clock_timestamp()::text)",
    "sqlite": "lower(hex(randomblob(16)))",
}


def _series_triggers(key: list[str]) -> None:
    """(Re)create the series' catalog generation triggers over ``id`` and ``key``."""
    dialect = op.get_bind().dialect.name
    bump = f"UPDATE catalog_generation SET token = {NEW_TOKEN[dialect]}"
    columns = ", ".join(["id", *key])
    if dialect == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS series_changes_generation ON series")
        op.execute(
            "CREATE TRIGGER series_changes_generation "
            f"AFTER DELETE OR TRUNCATE OR UPDATE OF {columns} ON series "
            "FOR EACH STATEMENT EXECUTE FUNCTION catalog_generation_bump()"
        )
        return
    op.execute("DROP TRIGGER IF EXISTS series_deleted_changes_generation")
    op.execute("DROP TRIGGER IF EXISTS series_rekeyed_changes_generation")
    op.execute(
        f"CREATE TRIGGER series_deleted_changes_generation AFTER DELETE ON series BEGIN {bump}; END"
    )
    op.execute(
        f"CREATE TRIGGER series_rekeyed_changes_generation AFTER UPDATE OF {columns} "
        f"ON series BEGIN {bump}; END"
    )


def upgrade() -> None:
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("project", sa.String(length=64), nullable=False, server_default="default")
        )
        batch_op.create_index(batch_op.f("ix_run_project"), ["project"], unique=False)
    with op.batch_alter_table("api_token", schema=None) as batch_op:
        batch_op.add_column(sa.Column("project", sa.String(length=64), nullable=True))
    with op.batch_alter_table("series", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("project", sa.String(length=64), nullable=False, server_default="default")
        )
        batch_op.drop_constraint(
            "uq_series_benchmark_id_metric_id_machine_id_channel", type_="unique"
        )
        batch_op.create_unique_constraint(
            batch_op.f("uq_series_benchmark_id_metric_id_machine_id_channel_project"), NEW_KEY
        )
    _series_triggers(NEW_KEY)


def downgrade() -> None:
    # Fails where two projects hold the same series: merging their histories is no downgrade.
    postgres = op.get_bind().dialect.name == "postgresql"
    if postgres:  # its trigger names the column: off it before the column goes
        _series_triggers(OLD_KEY)
    with op.batch_alter_table("series", schema=None) as batch_op:
        batch_op.drop_constraint(
            "uq_series_benchmark_id_metric_id_machine_id_channel_project", type_="unique"
        )
        batch_op.create_unique_constraint(
            batch_op.f("uq_series_benchmark_id_metric_id_machine_id_channel"), OLD_KEY
        )
        batch_op.drop_column("project")
    if not postgres:  # recreating the table dropped them
        _series_triggers(OLD_KEY)
    with op.batch_alter_table("api_token", schema=None) as batch_op:
        batch_op.drop_column("project")
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_run_project"))
        batch_op.drop_column("project")
