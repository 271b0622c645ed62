"""A running localization's lease: the worker that holds it, the attempt, until when.

A localization runs for minutes to hours on one worker; the worker renews its lease while it
measures. One whose worker died stops being renewed and is taken over once the lease lapses
(sent again by the shard sweep), instead of staying ``running`` for ever.

Revision ID: a7c9e1f30029
Revises: f6b8d0e20028
Create Date: 2026-12-06 02:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "a7c9e1f30029"
down_revision: str | None = "f6b8d0e20028"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("localization", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("worker", sa.String(length=256), nullable=False, server_default="")
        )
        batch_op.add_column(
            sa.Column("lease_id", sa.String(length=32), nullable=False, server_default="")
        )
        batch_op.add_column(sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("localization", schema=None) as batch_op:
        batch_op.drop_column("lease_until")
        batch_op.drop_column("lease_id")
        batch_op.drop_column("worker")
