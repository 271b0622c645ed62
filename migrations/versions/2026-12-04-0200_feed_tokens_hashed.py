"""Feed tokens are stored hashed; an annotation may belong to one project.

``subscription.feed_token`` held a feed's token in plain text: it now holds the token's
SHA-256 (hex, 64 characters, the column's size), and a feed is looked up by the hash of the
token in its URL (``app.notifications.feed.token_hash``). Not the API tokens' peppered HMAC:
the pepper is the server's setting, not the database's, so a migration run with another
environment (or a pepper changed later) would leave every feed unreachable; a feed token is
24 random bytes, which a plain SHA-256 keeps one-way. The downgrade cannot give the plain
tokens back: it empties the column, and a subscription saved again fills it.

``annotation.project`` (NULL: every project's, as every existing annotation stays) is what
lets a token limited to a project make and delete its own project's annotations only (the one
migration of this round that this change fills in, so both live here).

Revision ID: b2d4f6a80026
Revises: a1c3e5f70026
Create Date: 2026-12-04 00:00:00.000000
"""

import hashlib
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "b2d4f6a80026"
down_revision: str | None = "a1c3e5f70026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

subscription = sa.table(
    "subscription", sa.column("id", sa.Integer), sa.column("feed_token", sa.String)
)


def upgrade() -> None:
    bind = op.get_bind()
    rows = bind.execute(
        sa.select(subscription.c.id, subscription.c.feed_token).where(
            subscription.c.feed_token.is_not(None)
        )
    ).all()
    for row in rows:
        digest = hashlib.sha256(row.feed_token.encode()).hexdigest()
        bind.execute(
            subscription.update().where(subscription.c.id == row.id).values(feed_token=digest)
        )
    with op.batch_alter_table("annotation", schema=None) as batch_op:
        batch_op.add_column(sa.Column("project", sa.String(length=64), nullable=True))
        batch_op.create_index(batch_op.f("ix_annotation_project"), ["project"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("annotation", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_annotation_project"))
        batch_op.drop_column("project")
    op.execute(subscription.update().values(feed_token=None))
