"""Suite runs of the benchmark workers and their shards.

Revision ID: 8349bebabd6b
Revises: 7f51a66b669d
Create Date: 2026-11-29 20:53:27.558419
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "8349bebabd6b"
down_revision: str | None = "7f51a66b669d"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "suite_run",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("machine", sa.String(length=128), nullable=False),
        sa.Column("tier", sa.String(length=32), nullable=False),
        sa.Column("trigger", sa.String(length=32), nullable=False),
        sa.Column("description", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("run_id", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"], ["run.id"], name=op.f("fk_suite_run_run_id_run"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_suite_run")),
        sa.UniqueConstraint("key", name=op.f("uq_suite_run_key")),
    )
    with op.batch_alter_table("suite_run", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_suite_run_machine"), ["machine"], unique=False)

    op.create_table(
        "suite_shard",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("suite_run_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("label", sa.String(length=256), nullable=False),
        sa.Column("cases", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("worker", sa.String(length=256), nullable=False),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("rows", sa.JSON(), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["suite_run_id"],
            ["suite_run.id"],
            name=op.f("fk_suite_shard_suite_run_id_suite_run"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_suite_shard")),
        sa.UniqueConstraint(
            "suite_run_id", "position", name=op.f("uq_suite_shard_suite_run_id_position")
        ),
    )
    with op.batch_alter_table("suite_shard", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_suite_shard_status"), ["status"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("suite_shard", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_suite_shard_status"))

    op.drop_table("suite_shard")
    with op.batch_alter_table("suite_run", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_suite_run_machine"))

    op.drop_table("suite_run")
