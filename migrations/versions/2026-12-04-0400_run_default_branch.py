"""A run records why it was stored as a branch, apart from its channel's history.

``run.branch_reason``: empty for a run of the default branch; else which branch it is and
which default branch it is not, and whether the upload said that default (the repository's)
or BENCHWATCH_DEFAULT_BRANCHES guessed it. The run page shows it.

Revision ID: d4f6b8c00026
Revises: c3e5a7b90026
Create Date: 2026-12-04 00:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "d4f6b8c00026"
down_revision: str | None = "c3e5a7b90026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("branch_reason", sa.String(length=512), nullable=False, server_default="")
        )


def downgrade() -> None:
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.drop_column("branch_reason")
