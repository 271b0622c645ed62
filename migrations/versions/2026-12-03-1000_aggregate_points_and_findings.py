"""Aggregate points and findings: the dashboard's aggregates per group of models, judged.

Revision ID: e567477866d0
Revises: 7c1e52a9d0b4
Create Date: 2026-12-03 10:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "e567477866d0"
down_revision: str | None = "7c1e52a9d0b4"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "aggregate_point",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("machine_id", sa.Integer(), nullable=False),
        sa.Column("channel", sa.String(length=64), nullable=False),
        sa.Column("suite", sa.String(length=128), nullable=False),
        sa.Column("config", sa.String(length=128), nullable=False),
        sa.Column("precision", sa.String(length=16), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("stat", sa.String(length=32), nullable=False),
        sa.Column("value", sa.Float(), nullable=False),
        sa.Column("model_count", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["machine_id"], ["machine.id"], name=op.f("fk_aggregate_point_machine_id_machine")
        ),
        sa.ForeignKeyConstraint(["run_id"], ["run.id"], name=op.f("fk_aggregate_point_run_id_run")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_aggregate_point")),
        sa.UniqueConstraint(
            "run_id",
            "suite",
            "config",
            "precision",
            "mode",
            "stat",
            name="uq_aggregate_point_run_group_stat",
        ),
    )
    with op.batch_alter_table("aggregate_point", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_aggregate_point_run_id"), ["run_id"], unique=False)

    op.create_table(
        "aggregate_finding",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("group_id", sa.Integer(), nullable=False),
        sa.Column("machine_id", sa.Integer(), nullable=False),
        sa.Column("channel", sa.String(length=64), nullable=False),
        sa.Column("suite", sa.String(length=128), nullable=False),
        sa.Column("config", sa.String(length=128), nullable=False),
        sa.Column("precision", sa.String(length=16), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("stat", sa.String(length=32), nullable=False),
        sa.Column("rule", sa.String(length=32), nullable=False),
        sa.Column("before", sa.Float(), nullable=False),
        sa.Column("after", sa.Float(), nullable=False),
        sa.Column("rel_change", sa.Float(), nullable=False),
        sa.Column("last_good_run_id", sa.Integer(), nullable=False),
        sa.Column("first_bad_run_id", sa.Integer(), nullable=False),
        sa.Column("resolved_run_id", sa.Integer(), nullable=True),
        sa.Column("explained_by", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("assignee", sa.String(length=128), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("bug_url", sa.Text(), nullable=False),
        sa.Column("triaged_by", sa.String(length=200), nullable=False),
        sa.Column("triaged_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["first_bad_run_id"], ["run.id"], name=op.f("fk_aggregate_finding_first_bad_run_id_run")
        ),
        sa.ForeignKeyConstraint(
            ["group_id"], ["alert_group.id"], name=op.f("fk_aggregate_finding_group_id_alert_group")
        ),
        sa.ForeignKeyConstraint(
            ["last_good_run_id"], ["run.id"], name=op.f("fk_aggregate_finding_last_good_run_id_run")
        ),
        sa.ForeignKeyConstraint(
            ["machine_id"], ["machine.id"], name=op.f("fk_aggregate_finding_machine_id_machine")
        ),
        sa.ForeignKeyConstraint(
            ["resolved_run_id"], ["run.id"], name=op.f("fk_aggregate_finding_resolved_run_id_run")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_aggregate_finding")),
        sa.UniqueConstraint(
            "machine_id",
            "channel",
            "suite",
            "config",
            "precision",
            "mode",
            "stat",
            "rule",
            "first_bad_run_id",
            name="uq_aggregate_finding_series_rule_first_bad_run",
        ),
    )
    with op.batch_alter_table("aggregate_finding", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_aggregate_finding_first_bad_run_id"), ["first_bad_run_id"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_aggregate_finding_group_id"), ["group_id"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_aggregate_finding_machine_id"), ["machine_id"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_aggregate_finding_status"), ["status"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("aggregate_finding", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_aggregate_finding_status"))
        batch_op.drop_index(batch_op.f("ix_aggregate_finding_machine_id"))
        batch_op.drop_index(batch_op.f("ix_aggregate_finding_group_id"))
        batch_op.drop_index(batch_op.f("ix_aggregate_finding_first_bad_run_id"))

    op.drop_table("aggregate_finding")
    with op.batch_alter_table("aggregate_point", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_aggregate_point_run_id"))

    op.drop_table("aggregate_point")
