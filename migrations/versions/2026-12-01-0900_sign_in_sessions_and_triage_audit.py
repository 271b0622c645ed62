"""Sign-in sessions, who triaged what, and per-token machine patterns.

The dashboard's cookie now holds the id of a ``web_session`` row (its hash here), not the
token; triage records its author and time; a token can be limited to ingesting for machines
whose names match its patterns.

Revision ID: 4f7a2d9e1c30
Revises: 9d1f4c2b7e60
Create Date: 2026-12-01 09:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "4f7a2d9e1c30"
down_revision: str | None = "9d1f4c2b7e60"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TRIAGED = ("alert_group", "regression")


def upgrade() -> None:
    op.create_table(
        "web_session",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("session_hash", sa.String(length=64), nullable=False),
        sa.Column("token_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["token_id"],
            ["api_token.id"],
            name=op.f("fk_web_session_token_id_api_token"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_web_session")),
        sa.UniqueConstraint("session_hash", name=op.f("uq_web_session_session_hash")),
    )
    with op.batch_alter_table("web_session", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_web_session_token_id"), ["token_id"], unique=False)
    with op.batch_alter_table("api_token", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("machine_patterns", sa.JSON(), nullable=False, server_default="[]")
        )
    for table in TRIAGED:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(
                sa.Column("triaged_by", sa.String(length=200), nullable=False, server_default="")
            )
            batch_op.add_column(sa.Column("triaged_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    for table in TRIAGED:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column("triaged_at")
            batch_op.drop_column("triaged_by")
    with op.batch_alter_table("api_token", schema=None) as batch_op:
        batch_op.drop_column("machine_patterns")
    with op.batch_alter_table("web_session", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_web_session_token_id"))
    op.drop_table("web_session")
