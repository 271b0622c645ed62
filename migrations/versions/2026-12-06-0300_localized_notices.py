"""Notices of a finished localization: the notice names its localization, and a subscription
may ask that the culprit commit's author be mentioned.

``notice.localization_id``: the localization a ``localized`` notice tells of (null for every
other event; set null if the localization goes, and the notice is then not sent).
``subscription.mention_author``: false for every subscription stored before, as for a new one.

Revision ID: b8d0f2a40030
Revises: a7c9e1f30029
Create Date: 2026-12-06 03:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "b8d0f2a40030"
down_revision: str | None = "a7c9e1f30029"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("subscription", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("mention_author", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    with op.batch_alter_table("notice", schema=None) as batch_op:
        batch_op.add_column(sa.Column("localization_id", sa.Integer(), nullable=True))
        batch_op.create_index(
            batch_op.f("ix_notice_localization_id"), ["localization_id"], unique=False
        )
        batch_op.create_foreign_key(
            batch_op.f("fk_notice_localization_id_localization"),
            "localization",
            ["localization_id"],
            ["id"],
            ondelete="SET NULL",
        )


def downgrade() -> None:
    with op.batch_alter_table("notice", schema=None) as batch_op:
        batch_op.drop_constraint(
            batch_op.f("fk_notice_localization_id_localization"), type_="foreignkey"
        )
        batch_op.drop_index(batch_op.f("ix_notice_localization_id"))
        batch_op.drop_column("localization_id")
    with op.batch_alter_table("subscription", schema=None) as batch_op:
        batch_op.drop_column("mention_author")
