"""A subscription no longer keeps its feed's plain token, only its hash.

Migration b2d4f6a80026 hashed ``subscription.feed_token``, but the plain token stayed in the
feed receiver of ``subscription.receivers``: this removes it (filling ``feed_token`` from it
where the hash is missing). A feed's delivery key was a hash of its token; it is now one key
for a subscription's feed (``app.notifications.targets.where``), so the feed deliveries of the
token being dropped take that key.

The downgrade does nothing: the plain tokens cannot come back from their hashes, and the
code before this revision serves a feed by its hash all the same (a change that leaves the
feed's token out there gives it a new one).

Revision ID: e5a7c9d10027
Revises: d4f6b8c00026
Create Date: 2026-12-05 00:00:00.000000
"""

import hashlib
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "e5a7c9d10027"
down_revision: str | None = "d4f6b8c00026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

subscription = sa.table(
    "subscription",
    sa.column("id", sa.Integer),
    sa.column("receivers", sa.JSON),
    sa.column("feed_token", sa.String),
)
delivery = sa.table(
    "delivery",
    sa.column("notice_id", sa.Integer),
    sa.column("receiver_key", sa.String),
    sa.column("kind", sa.String),
)

other = delivery.alias("other")


def _key(where: str) -> str:
    """``targets.receiver_key`` of a feed, as of this revision (a frozen copy)."""
    return "feed:" + hashlib.sha256(where.encode()).hexdigest()[:32]


def upgrade() -> None:
    bind = op.get_bind()
    rows = bind.execute(
        sa.select(subscription.c.id, subscription.c.receivers, subscription.c.feed_token)
    ).all()
    for row in rows:
        receivers: list[dict[str, Any]] = list(row.receivers or [])
        tokens = [str(r["token"]) for r in receivers if isinstance(r, dict) and r.get("token")]
        if not tokens:
            continue
        kept = [{k: v for k, v in r.items() if k != "token"} for r in receivers]
        digest = row.feed_token or hashlib.sha256(tokens[0].encode()).hexdigest()
        bind.execute(
            subscription.update()
            .where(subscription.c.id == row.id)
            .values(receivers=kept, feed_token=digest)
        )
        for token in tokens:
            bind.execute(
                delivery.update()
                .where(
                    delivery.c.kind == "feed",
                    delivery.c.receiver_key == _key(token),
                    ~sa.exists().where(  # (notice, key) is unique: one such is left as it was
                        other.c.notice_id == delivery.c.notice_id,
                        other.c.receiver_key == _key(""),
                    ),
                )
                .values(receiver_key=_key(""))
            )


def downgrade() -> None:
    """Nothing: a hash gives no token back (see the module's text)."""
