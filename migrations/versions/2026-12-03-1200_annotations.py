"""Annotations: events on the timeline, global or of a machine (and channel).

Revision ID: 2a7e4c9b1f03
Revises: 9d3b7f1c2e55
Create Date: 2026-12-03 12:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "2a7e4c9b1f03"
down_revision: str | None = "9d3b7f1c2e55"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "annotation",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ends_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("machine", sa.String(length=128), nullable=True),
        sa.Column("channel", sa.String(length=64), nullable=True),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("created_by", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_annotation")),
    )
    with op.batch_alter_table("annotation", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_annotation_at"), ["at"], unique=False)
        batch_op.create_index(batch_op.f("ix_annotation_machine"), ["machine"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("annotation", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_annotation_machine"))
        batch_op.drop_index(batch_op.f("ix_annotation_at"))

    op.drop_table("annotation")
