"""Kernel profiles: a case's kernels in a run, under their normalised identity.

``kernel_profile``: one row per (run, benchmark), gone with its run or its benchmark. The
kernels are a JSON list; nothing queries inside it.

Revision ID: c9e1a3b50031
Revises: b8d0f2a40030
Create Date: 2026-12-06 04:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "c9e1a3b50031"
down_revision: str | None = "b8d0f2a40030"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "kernel_profile",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("benchmark_id", sa.Integer(), nullable=False),
        sa.Column("timing", sa.String(length=16), nullable=False),
        sa.Column("calls", sa.Integer(), nullable=False),
        sa.Column("wall_us", sa.Float(), nullable=False),
        sa.Column("kernel_us", sa.Float(), nullable=False),
        sa.Column("other_us", sa.Float(), nullable=False),
        sa.Column("graphs", sa.Integer(), nullable=True),
        sa.Column("recompiles", sa.Integer(), nullable=True),
        sa.Column("kernels", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["benchmark_id"],
            ["benchmark.id"],
            name=op.f("fk_kernel_profile_benchmark_id_benchmark"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["run_id"], ["run.id"], name=op.f("fk_kernel_profile_run_id_run"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_kernel_profile")),
        sa.UniqueConstraint(
            "run_id", "benchmark_id", name=op.f("uq_kernel_profile_run_id_benchmark_id")
        ),
    )
    with op.batch_alter_table("kernel_profile", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_kernel_profile_benchmark_id"), ["benchmark_id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("kernel_profile", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_kernel_profile_benchmark_id"))

    op.drop_table("kernel_profile")
