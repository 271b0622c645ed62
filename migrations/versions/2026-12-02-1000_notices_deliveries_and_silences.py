"""The notification outbox: notices, their deliveries and attempts; silences; subscription source.

Revision ID: de9aaf9a0700
Revises: b61e0d7a3f25
Create Date: 2026-12-02 10:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "de9aaf9a0700"
down_revision: str | None = "b61e0d7a3f25"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "silence",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("matchers", sa.JSON(), nullable=False),
        sa.Column("starts_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ends_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("comment", sa.Text(), nullable=False),
        sa.Column("created_by", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_silence")),
    )
    with op.batch_alter_table("silence", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_silence_ends_at"), ["ends_at"], unique=False)

    op.create_table(
        "notice",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("subscription_id", sa.Integer(), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("group_id", sa.Integer(), nullable=True),
        sa.Column("event", sa.String(length=16), nullable=False),
        sa.Column("event_key", sa.String(length=64), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("findings", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("payload", sa.JSON(), nullable=True),
        sa.Column("digest_id", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["digest_id"], ["notice.id"], name=op.f("fk_notice_digest_id_notice")
        ),
        sa.ForeignKeyConstraint(
            ["group_id"], ["alert_group.id"], name=op.f("fk_notice_group_id_alert_group")
        ),
        sa.ForeignKeyConstraint(
            ["subscription_id"],
            ["subscription.id"],
            name=op.f("fk_notice_subscription_id_subscription"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_notice")),
        sa.UniqueConstraint(
            "subscription_id", "event_key", name=op.f("uq_notice_subscription_id_event_key")
        ),
    )
    with op.batch_alter_table("notice", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_notice_group_id"), ["group_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_notice_state"), ["state"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_notice_subscription_id"), ["subscription_id"], unique=False
        )

    op.create_table(
        "delivery",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("notice_id", sa.Integer(), nullable=False),
        sa.Column("receiver_key", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("target", sa.String(length=300), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_status", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=False),
        sa.Column("receipt", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["notice_id"],
            ["notice.id"],
            name=op.f("fk_delivery_notice_id_notice"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_delivery")),
        sa.UniqueConstraint(
            "notice_id", "receiver_key", name=op.f("uq_delivery_notice_id_receiver_key")
        ),
    )
    with op.batch_alter_table("delivery", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_delivery_next_attempt_at"), ["next_attempt_at"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_delivery_notice_id"), ["notice_id"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_delivery_receiver_key"), ["receiver_key"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_delivery_state"), ["state"], unique=False)

    op.create_table(
        "delivery_attempt",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("delivery_id", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ok", sa.Boolean(), nullable=False),
        sa.Column("status", sa.Integer(), nullable=True),
        sa.Column("latency_ms", sa.Float(), nullable=False),
        sa.Column("error", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["delivery_id"],
            ["delivery.id"],
            name=op.f("fk_delivery_attempt_delivery_id_delivery"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_delivery_attempt")),
    )
    with op.batch_alter_table("delivery_attempt", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_delivery_attempt_delivery_id"), ["delivery_id"], unique=False
        )

    with op.batch_alter_table("subscription", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("source", sa.String(length=16), nullable=False, server_default="api")
        )
        batch_op.add_column(sa.Column("feed_token", sa.String(length=64), nullable=True))
        batch_op.create_unique_constraint(batch_op.f("uq_subscription_feed_token"), ["feed_token"])


def downgrade() -> None:
    with op.batch_alter_table("subscription", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("uq_subscription_feed_token"), type_="unique")
        batch_op.drop_column("feed_token")
        batch_op.drop_column("source")

    with op.batch_alter_table("delivery_attempt", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_delivery_attempt_delivery_id"))

    op.drop_table("delivery_attempt")
    with op.batch_alter_table("delivery", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_delivery_state"))
        batch_op.drop_index(batch_op.f("ix_delivery_receiver_key"))
        batch_op.drop_index(batch_op.f("ix_delivery_notice_id"))
        batch_op.drop_index(batch_op.f("ix_delivery_next_attempt_at"))

    op.drop_table("delivery")
    with op.batch_alter_table("notice", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_notice_subscription_id"))
        batch_op.drop_index(batch_op.f("ix_notice_state"))
        batch_op.drop_index(batch_op.f("ix_notice_group_id"))

    op.drop_table("notice")
    with op.batch_alter_table("silence", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_silence_ends_at"))

    op.drop_table("silence")
