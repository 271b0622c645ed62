"""A triaged finding's link to another alert group: what a duplicate or downstream one is of.

``related_group_id`` on every triaged table (alert groups and their findings), null unless the
finding's status is ``duplicate`` or ``downstream``. The new statuses (``infra``,
``downstream``, ``duplicate``) are values of the existing ``status`` columns.

Revision ID: b4d6f8a00036
Revises: a3c5e7f90035
Create Date: 2026-12-06 09:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "b4d6f8a00036"
down_revision: str | None = "a3c5e7f90035"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("alert_group", "regression", "case_failure", "machine_silence", "aggregate_finding")


def upgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column("related_group_id", sa.Integer(), nullable=True))
            batch_op.create_foreign_key(
                batch_op.f(f"fk_{table}_related_group_id_alert_group"),
                "alert_group",
                ["related_group_id"],
                ["id"],
            )


def downgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_constraint(
                batch_op.f(f"fk_{table}_related_group_id_alert_group"), type_="foreignkey"
            )
            batch_op.drop_column("related_group_id")
