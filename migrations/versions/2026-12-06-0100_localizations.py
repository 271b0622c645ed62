"""Localizations and their probes: evidence kept beside the finding they serve.

Revision ID: f6b8d0e20028
Revises: e5a7c9d10027
Create Date: 2026-12-06 01:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "f6b8d0e20028"
down_revision: str | None = "e5a7c9d10027"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "localization",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("finding_kind", sa.String(length=16), nullable=False),
        sa.Column("finding_id", sa.Integer(), nullable=False),
        sa.Column("regression_id", sa.Integer(), nullable=True),
        sa.Column("case_failure_id", sa.Integer(), nullable=True),
        sa.Column("aggregate_finding_id", sa.Integer(), nullable=True),
        sa.Column("group_id", sa.Integer(), nullable=True),
        sa.Column("suite_run_id", sa.Integer(), nullable=True),
        sa.Column("machine", sa.String(length=128), nullable=False),
        sa.Column("project", sa.String(length=64), nullable=False),
        sa.Column("good_run_id", sa.Integer(), nullable=True),
        sa.Column("bad_run_id", sa.Integer(), nullable=True),
        sa.Column("case", sa.JSON(), nullable=False),
        sa.Column("good_environment", sa.JSON(), nullable=False),
        sa.Column("bad_environment", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("started_by", sa.String(length=200), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("answer", sa.JSON(), nullable=False),
        sa.Column("probe_count", sa.Integer(), nullable=False),
        sa.Column("repeats", sa.Integer(), nullable=False),
        sa.Column("builds", sa.Integer(), nullable=False),
        sa.Column("samples", sa.Integer(), nullable=False),
        sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["aggregate_finding_id"],
            ["aggregate_finding.id"],
            name=op.f("fk_localization_aggregate_finding_id_aggregate_finding"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["bad_run_id"],
            ["run.id"],
            name=op.f("fk_localization_bad_run_id_run"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["case_failure_id"],
            ["case_failure.id"],
            name=op.f("fk_localization_case_failure_id_case_failure"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["good_run_id"],
            ["run.id"],
            name=op.f("fk_localization_good_run_id_run"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["group_id"],
            ["alert_group.id"],
            name=op.f("fk_localization_group_id_alert_group"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["regression_id"],
            ["regression.id"],
            name=op.f("fk_localization_regression_id_regression"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["suite_run_id"],
            ["suite_run.id"],
            name=op.f("fk_localization_suite_run_id_suite_run"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_localization")),
    )
    with op.batch_alter_table("localization", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_localization_aggregate_finding_id"),
            ["aggregate_finding_id"],
            unique=False,
        )
        batch_op.create_index(
            batch_op.f("ix_localization_case_failure_id"), ["case_failure_id"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_localization_group_id"), ["group_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_localization_machine"), ["machine"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_localization_regression_id"), ["regression_id"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_localization_requested_at"), ["requested_at"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_localization_state"), ["state"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_localization_suite_run_id"), ["suite_run_id"], unique=False
        )

    op.create_table(
        "localization_probe",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("localization_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("strategy", sa.String(length=16), nullable=False),
        sa.Column("label", sa.String(length=256), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("samples", sa.JSON(), nullable=False),
        sa.Column("p_good", sa.Float(), nullable=True),
        sa.Column("p_bad", sa.Float(), nullable=True),
        sa.Column("step_position", sa.Float(), nullable=True),
        sa.Column("effect", sa.Float(), nullable=True),
        sa.Column("rounds", sa.Integer(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("measured_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["localization_id"],
            ["localization.id"],
            name=op.f("fk_localization_probe_localization_id_localization"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_localization_probe")),
    )
    with op.batch_alter_table("localization_probe", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_localization_probe_localization_id"), ["localization_id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("localization_probe", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_localization_probe_localization_id"))

    op.drop_table("localization_probe")
    with op.batch_alter_table("localization", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_localization_suite_run_id"))
        batch_op.drop_index(batch_op.f("ix_localization_state"))
        batch_op.drop_index(batch_op.f("ix_localization_requested_at"))
        batch_op.drop_index(batch_op.f("ix_localization_regression_id"))
        batch_op.drop_index(batch_op.f("ix_localization_machine"))
        batch_op.drop_index(batch_op.f("ix_localization_group_id"))
        batch_op.drop_index(batch_op.f("ix_localization_case_failure_id"))
        batch_op.drop_index(batch_op.f("ix_localization_aggregate_finding_id"))

    op.drop_table("localization")
