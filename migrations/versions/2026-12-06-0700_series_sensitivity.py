"""How sensitive detection is on a series: learnt from its triage, or pinned by a person.

``series_sensitivity``: one row per series whose sensitivity moved or was set; a series with
no row has the configured thresholds.

Revision ID: f2b4d6e80034
Revises: e1a3c5d70033
Create Date: 2026-12-06 07:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "f2b4d6e80034"
down_revision: str | None = "e1a3c5d70033"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "series_sensitivity",
        sa.Column("series_id", sa.Integer(), nullable=False),
        sa.Column("factor", sa.Float(), nullable=False),
        sa.Column("learning", sa.Boolean(), nullable=False),
        sa.Column("pinned", sa.JSON(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("updated_by", sa.String(length=200), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["series_id"], ["series.id"], name=op.f("fk_series_sensitivity_series_id_series")
        ),
        sa.PrimaryKeyConstraint("series_id", name=op.f("pk_series_sensitivity")),
    )


def downgrade() -> None:
    op.drop_table("series_sensitivity")
