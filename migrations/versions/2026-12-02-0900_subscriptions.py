"""Subscriptions: match and exclude rules, receivers and timing as JSON, paused, revision.

Revision ID: b61e0d7a3f25
Revises: 7c3e5a1b9d42
Create Date: 2026-12-02 09:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "b61e0d7a3f25"
down_revision: str | None = "7c3e5a1b9d42"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "subscription",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("owner", sa.String(length=256), nullable=False),
        sa.Column("match", sa.JSON(), nullable=False),
        sa.Column("exclude", sa.JSON(), nullable=False),
        sa.Column("receivers", sa.JSON(), nullable=False),
        sa.Column("when", sa.JSON(), nullable=False),
        sa.Column("paused", sa.Boolean(), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_subscription")),
        sa.UniqueConstraint("name", name=op.f("uq_subscription_name")),
    )


def downgrade() -> None:
    op.drop_table("subscription")
