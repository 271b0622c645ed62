"""Which run's detection confirmed a regression.

Revision ID: ae463a1c7099
Revises: 5c4bb46ff9fb
Create Date: 2026-11-29 21:42:45.996033
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "ae463a1c7099"
down_revision: str | None = "5c4bb46ff9fb"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("regression", schema=None) as batch_op:
        batch_op.add_column(sa.Column("found_by_run_id", sa.Integer(), nullable=True))
        batch_op.create_index(
            batch_op.f("ix_regression_found_by_run_id"), ["found_by_run_id"], unique=False
        )
        batch_op.create_foreign_key(
            batch_op.f("fk_regression_found_by_run_id_run"), "run", ["found_by_run_id"], ["id"]
        )


def downgrade() -> None:
    with op.batch_alter_table("regression", schema=None) as batch_op:
        batch_op.drop_constraint(
            batch_op.f("fk_regression_found_by_run_id_run"), type_="foreignkey"
        )
        batch_op.drop_index(batch_op.f("ix_regression_found_by_run_id"))
        batch_op.drop_column("found_by_run_id")
