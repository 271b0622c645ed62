"""Failure findings: cases that passed and now fail, grouped and triaged like regressions.

Revision ID: 3f36ad7411c2
Revises: de9aaf9a0700
Create Date: 2026-12-02 11:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "3f36ad7411c2"
down_revision: str | None = "de9aaf9a0700"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "case_failure",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("group_id", sa.Integer(), nullable=False),
        sa.Column("benchmark_id", sa.Integer(), nullable=False),
        sa.Column("machine_id", sa.Integer(), nullable=False),
        sa.Column("channel", sa.String(length=64), nullable=False),
        sa.Column("last_passing_run_id", sa.Integer(), nullable=False),
        sa.Column("first_failing_run_id", sa.Integer(), nullable=False),
        sa.Column("passing_again_run_id", sa.Integer(), nullable=True),
        sa.Column("failure", sa.String(length=16), nullable=False),
        sa.Column("metric", sa.String(length=128), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("flaky", sa.Boolean(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("assignee", sa.String(length=128), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("bug_url", sa.Text(), nullable=False),
        sa.Column("triaged_by", sa.String(length=200), nullable=False),
        sa.Column("triaged_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["benchmark_id"], ["benchmark.id"], name=op.f("fk_case_failure_benchmark_id_benchmark")
        ),
        sa.ForeignKeyConstraint(
            ["first_failing_run_id"],
            ["run.id"],
            name=op.f("fk_case_failure_first_failing_run_id_run"),
        ),
        sa.ForeignKeyConstraint(
            ["group_id"], ["alert_group.id"], name=op.f("fk_case_failure_group_id_alert_group")
        ),
        sa.ForeignKeyConstraint(
            ["last_passing_run_id"],
            ["run.id"],
            name=op.f("fk_case_failure_last_passing_run_id_run"),
        ),
        sa.ForeignKeyConstraint(
            ["machine_id"], ["machine.id"], name=op.f("fk_case_failure_machine_id_machine")
        ),
        sa.ForeignKeyConstraint(
            ["passing_again_run_id"],
            ["run.id"],
            name=op.f("fk_case_failure_passing_again_run_id_run"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_case_failure")),
        sa.UniqueConstraint(
            "benchmark_id",
            "machine_id",
            "channel",
            "first_failing_run_id",
            name="uq_case_failure_case_first_failing_run",
        ),
    )
    with op.batch_alter_table("case_failure", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_case_failure_benchmark_id"), ["benchmark_id"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_case_failure_first_failing_run_id"),
            ["first_failing_run_id"],
            unique=False,
        )
        batch_op.create_index(batch_op.f("ix_case_failure_group_id"), ["group_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_case_failure_status"), ["status"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("case_failure", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_case_failure_status"))
        batch_op.drop_index(batch_op.f("ix_case_failure_group_id"))
        batch_op.drop_index(batch_op.f("ix_case_failure_first_failing_run_id"))
        batch_op.drop_index(batch_op.f("ix_case_failure_benchmark_id"))

    op.drop_table("case_failure")
