"""Sharded runs: a run's expected shards and fork point, and the shards it received.

Revision ID: 9d3b7f1c2e55
Revises: e567477866d0
Create Date: 2026-12-03 11:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "9d3b7f1c2e55"
down_revision: str | None = "e567477866d0"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("run") as batch:
        batch.add_column(sa.Column("expected_shards", sa.Integer(), nullable=True))
        batch.add_column(
            sa.Column("base_commit", sa.String(length=64), nullable=False, server_default="")
        )
    op.create_table(
        "run_shard",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("payload_hash", sa.String(length=64), nullable=False),
        sa.Column("result_count", sa.Integer(), nullable=False),
        sa.Column("duplicates", sa.Integer(), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["run.id"], name=op.f("fk_run_shard_run_id_run"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_run_shard")),
        sa.UniqueConstraint("run_id", "name", name=op.f("uq_run_shard_run_id_name")),
    )
    with op.batch_alter_table("run_shard") as batch:
        batch.create_index(batch.f("ix_run_shard_run_id"), ["run_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("run_shard") as batch:
        batch.drop_index(batch.f("ix_run_shard_run_id"))
    op.drop_table("run_shard")
    with op.batch_alter_table("run") as batch:
        batch.drop_column("base_commit")
        batch.drop_column("expected_shards")
