"""Generated code: what Inductor generated for a case in a run, compressed.

``kernel_code``: one row per (run, benchmark), gone with its run or its benchmark, cleared by
retention with the samples.

Revision ID: d0f2b4c60032
Revises: c9e1a3b50031
Create Date: 2026-12-06 05:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "d0f2b4c60032"
down_revision: str | None = "c9e1a3b50031"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "kernel_code",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("benchmark_id", sa.Integer(), nullable=False),
        sa.Column("graphs", sa.Integer(), nullable=False),
        sa.Column("kernels", sa.Integer(), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("compressed", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["benchmark_id"],
            ["benchmark.id"],
            name=op.f("fk_kernel_code_benchmark_id_benchmark"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["run_id"], ["run.id"], name=op.f("fk_kernel_code_run_id_run"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_kernel_code")),
        sa.UniqueConstraint(
            "run_id", "benchmark_id", name=op.f("uq_kernel_code_run_id_benchmark_id")
        ),
    )
    with op.batch_alter_table("kernel_code", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_kernel_code_benchmark_id"), ["benchmark_id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("kernel_code", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_kernel_code_benchmark_id"))

    op.drop_table("kernel_code")
