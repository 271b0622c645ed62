"""A suite run's failure reason, and the lease id of a shard's attempt.

Revision ID: 7c3e5a1b9d42
Revises: 4f7a2d9e1c30
Create Date: 2026-12-01 09:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "7c3e5a1b9d42"
down_revision: str | None = "4f7a2d9e1c30"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("suite_run", schema=None) as batch_op:
        batch_op.add_column(sa.Column("reason", sa.Text(), nullable=False, server_default=""))
    with op.batch_alter_table("suite_shard", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("lease_id", sa.String(length=32), nullable=False, server_default="")
        )


def downgrade() -> None:
    with op.batch_alter_table("suite_shard", schema=None) as batch_op:
        batch_op.drop_column("lease_id")
    with op.batch_alter_table("suite_run", schema=None) as batch_op:
        batch_op.drop_column("reason")
