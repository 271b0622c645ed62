"""A localization probe's kernel profile: the case's kernels in the probe's environment.

``localization_probe.kernel_profile``: JSON, null for every probe stored before (and for a
probe whose command gave no profile).

Revision ID: e1a3c5d70033
Revises: d0f2b4c60032
Create Date: 2026-12-06 06:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "e1a3c5d70033"
down_revision: str | None = "d0f2b4c60032"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("localization_probe", schema=None) as batch_op:
        batch_op.add_column(sa.Column("kernel_profile", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("localization_probe", schema=None) as batch_op:
        batch_op.drop_column("kernel_profile")
