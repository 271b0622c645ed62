"""The audit log; invalidated runs (their reason, and their results kept apart).

Revision ID: 5c8e1a7d3b42
Revises: 2a7e4c9b1f03
Create Date: 2026-12-03 13:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "5c8e1a7d3b42"
down_revision: str | None = "2a7e4c9b1f03"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "audit_entry",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("action", sa.String(length=64), nullable=False),
        sa.Column("target", sa.String(length=128), nullable=False),
        sa.Column("before", sa.JSON(), nullable=False),
        sa.Column("after", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_entry")),
    )
    with op.batch_alter_table("audit_entry", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_audit_entry_action"), ["action"], unique=False)
        batch_op.create_index(batch_op.f("ix_audit_entry_actor"), ["actor"], unique=False)
        batch_op.create_index(batch_op.f("ix_audit_entry_at"), ["at"], unique=False)
        batch_op.create_index(batch_op.f("ix_audit_entry_target"), ["target"], unique=False)
    op.create_table(
        "invalidated_result",
        sa.Column("run_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("series_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("measured_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("value", sa.Float(), nullable=True),
        sa.Column("samples", sa.JSON(), nullable=True),
        sa.Column("text_value", sa.String(length=256), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("extra", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("run_id", "series_id", name=op.f("pk_invalidated_result")),
    )
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.add_column(sa.Column("invalidated_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(
            sa.Column("invalidated_by", sa.String(length=200), nullable=False, server_default="")
        )
        batch_op.add_column(
            sa.Column("invalidated_reason", sa.Text(), nullable=False, server_default="")
        )


def downgrade() -> None:
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.drop_column("invalidated_reason")
        batch_op.drop_column("invalidated_by")
        batch_op.drop_column("invalidated_at")
    op.drop_table("invalidated_result")
    with op.batch_alter_table("audit_entry", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_audit_entry_target"))
        batch_op.drop_index(batch_op.f("ix_audit_entry_at"))
        batch_op.drop_index(batch_op.f("ix_audit_entry_actor"))
        batch_op.drop_index(batch_op.f("ix_audit_entry_action"))
    op.drop_table("audit_entry")
