"""When detection last judged a run.

Revision ID: 5c4bb46ff9fb
Revises: 8349bebabd6b
Create Date: 2026-11-29 21:36:06.186384
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "5c4bb46ff9fb"
down_revision: str | None = "8349bebabd6b"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.add_column(sa.Column("detected_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.drop_column("detected_at")
