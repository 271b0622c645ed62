"""The state of the GitHub issues groups' bug links name: told by GitHub's webhook, or polled.

Revision ID: c5e7a9b10037
Revises: b4d6f8a00036
Create Date: 2026-12-06 10:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "c5e7a9b10037"
down_revision: str | None = "b4d6f8a00036"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "issue_state",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("url", sa.String(length=512), nullable=False),
        sa.Column("repository", sa.String(length=201), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("state_reason", sa.String(length=32), nullable=False),
        sa.Column("checked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("changed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_issue_state")),
        sa.UniqueConstraint("url", name=op.f("uq_issue_state_url")),
    )


def downgrade() -> None:
    op.drop_table("issue_state")
