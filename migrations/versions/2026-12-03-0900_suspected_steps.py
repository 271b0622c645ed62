"""Suspected steps: a regression's state (suspected, confirmed, withdrawn) and its confirmation.

Revision ID: 7c1e52a9d0b4
Revises: 5f4214d39bb7
Create Date: 2026-12-03 09:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "7c1e52a9d0b4"
down_revision: str | None = "5f4214d39bb7"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("regression") as batch:
        batch.add_column(
            sa.Column("state", sa.String(length=16), nullable=False, server_default="confirmed")
        )
        batch.add_column(
            sa.Column("confirmation", sa.JSON(), nullable=False, server_default=sa.text("'{}'"))
        )
        batch.create_index(batch.f("ix_regression_state"), ["state"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("regression") as batch:
        batch.drop_index(batch.f("ix_regression_state"))
        batch.drop_column("confirmation")
        batch.drop_column("state")
