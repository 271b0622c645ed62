"""Silent machines: a finding per machine and channel that stopped reporting.

Revision ID: 5f4214d39bb7
Revises: 3f36ad7411c2
Create Date: 2026-12-02 11:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "5f4214d39bb7"
down_revision: str | None = "3f36ad7411c2"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "machine_silence",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("group_id", sa.Integer(), nullable=False),
        sa.Column("machine_id", sa.Integer(), nullable=False),
        sa.Column("channel", sa.String(length=64), nullable=False),
        sa.Column("last_run_id", sa.Integer(), nullable=False),
        sa.Column("expected_every_s", sa.Float(), nullable=False),
        sa.Column("silent_since", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_by_run_id", sa.Integer(), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("assignee", sa.String(length=128), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("bug_url", sa.Text(), nullable=False),
        sa.Column("triaged_by", sa.String(length=200), nullable=False),
        sa.Column("triaged_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["ended_by_run_id"], ["run.id"], name=op.f("fk_machine_silence_ended_by_run_id_run")
        ),
        sa.ForeignKeyConstraint(
            ["group_id"], ["alert_group.id"], name=op.f("fk_machine_silence_group_id_alert_group")
        ),
        sa.ForeignKeyConstraint(
            ["last_run_id"], ["run.id"], name=op.f("fk_machine_silence_last_run_id_run")
        ),
        sa.ForeignKeyConstraint(
            ["machine_id"], ["machine.id"], name=op.f("fk_machine_silence_machine_id_machine")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_machine_silence")),
        sa.UniqueConstraint(
            "machine_id",
            "channel",
            "last_run_id",
            name=op.f("uq_machine_silence_machine_id_channel_last_run_id"),
        ),
    )
    with op.batch_alter_table("machine_silence", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_machine_silence_group_id"), ["group_id"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_machine_silence_machine_id"), ["machine_id"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_machine_silence_status"), ["status"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("machine_silence", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_machine_silence_status"))
        batch_op.drop_index(batch_op.f("ix_machine_silence_machine_id"))
        batch_op.drop_index(batch_op.f("ix_machine_silence_group_id"))

    op.drop_table("machine_silence")
