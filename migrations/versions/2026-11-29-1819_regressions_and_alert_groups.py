"""Regressions, alert groups and run anomalies (the anomaly service).

Revision ID: 7f51a66b669d
Revises: 8783272ee5a6
Create Date: 2026-11-29 18:19:07.773873
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "7f51a66b669d"
down_revision: str | None = "8783272ee5a6"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "alert_group",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("machine_id", sa.Integer(), nullable=False),
        sa.Column("channel", sa.String(length=64), nullable=False),
        sa.Column("first_bad_run_id", sa.Integer(), nullable=False),
        sa.Column("last_good_run_id", sa.Integer(), nullable=False),
        sa.Column("environment_diff", sa.JSON(), nullable=False),
        sa.Column("assignee", sa.String(length=128), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("bug_url", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["first_bad_run_id"], ["run.id"], name=op.f("fk_alert_group_first_bad_run_id_run")
        ),
        sa.ForeignKeyConstraint(
            ["last_good_run_id"], ["run.id"], name=op.f("fk_alert_group_last_good_run_id_run")
        ),
        sa.ForeignKeyConstraint(
            ["machine_id"], ["machine.id"], name=op.f("fk_alert_group_machine_id_machine")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_alert_group")),
    )
    with op.batch_alter_table("alert_group", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_alert_group_first_bad_run_id"), ["first_bad_run_id"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_alert_group_machine_id"), ["machine_id"], unique=False)

    op.create_table(
        "run_anomaly",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("anomalous", sa.Boolean(), nullable=False),
        sa.Column("features", sa.JSON(), nullable=False),
        sa.Column("history_runs", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["run.id"], name=op.f("fk_run_anomaly_run_id_run")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_run_anomaly")),
        sa.UniqueConstraint("run_id", name=op.f("uq_run_anomaly_run_id")),
    )
    op.create_table(
        "regression",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("series_id", sa.Integer(), nullable=False),
        sa.Column("group_id", sa.Integer(), nullable=False),
        sa.Column("last_good_run_id", sa.Integer(), nullable=False),
        sa.Column("first_bad_run_id", sa.Integer(), nullable=False),
        sa.Column("direction", sa.String(length=16), nullable=False),
        sa.Column("before", sa.Float(), nullable=False),
        sa.Column("after", sa.Float(), nullable=False),
        sa.Column("before_spread", sa.Float(), nullable=False),
        sa.Column("after_spread", sa.Float(), nullable=False),
        sa.Column("rel_change", sa.Float(), nullable=False),
        sa.Column("p_value", sa.Float(), nullable=False),
        sa.Column("detector", sa.JSON(), nullable=False),
        sa.Column("environment_diff", sa.JSON(), nullable=False),
        sa.Column("hints", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("reverted", sa.Boolean(), nullable=False),
        sa.Column("reverted_by_run_id", sa.Integer(), nullable=True),
        sa.Column("assignee", sa.String(length=128), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("bug_url", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["first_bad_run_id"], ["run.id"], name=op.f("fk_regression_first_bad_run_id_run")
        ),
        sa.ForeignKeyConstraint(
            ["group_id"], ["alert_group.id"], name=op.f("fk_regression_group_id_alert_group")
        ),
        sa.ForeignKeyConstraint(
            ["last_good_run_id"], ["run.id"], name=op.f("fk_regression_last_good_run_id_run")
        ),
        sa.ForeignKeyConstraint(
            ["reverted_by_run_id"], ["run.id"], name=op.f("fk_regression_reverted_by_run_id_run")
        ),
        sa.ForeignKeyConstraint(
            ["series_id"], ["series.id"], name=op.f("fk_regression_series_id_series")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_regression")),
        sa.UniqueConstraint(
            "series_id", "first_bad_run_id", name=op.f("uq_regression_series_id_first_bad_run_id")
        ),
    )
    with op.batch_alter_table("regression", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_regression_first_bad_run_id"), ["first_bad_run_id"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_regression_group_id"), ["group_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_regression_series_id"), ["series_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_regression_status"), ["status"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("regression", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_regression_status"))
        batch_op.drop_index(batch_op.f("ix_regression_series_id"))
        batch_op.drop_index(batch_op.f("ix_regression_group_id"))
        batch_op.drop_index(batch_op.f("ix_regression_first_bad_run_id"))

    op.drop_table("regression")
    op.drop_table("run_anomaly")
    with op.batch_alter_table("alert_group", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_alert_group_machine_id"))
        batch_op.drop_index(batch_op.f("ix_alert_group_first_bad_run_id"))

    op.drop_table("alert_group")
