"""Feed tokens are stored hashed.

(A placeholder in the chain; filled in by the change that needs it.)

Revision ID: b2d4f6a80026
Revises: a1c3e5f70026
Create Date: 2026-12-04 00:00:00.000000
"""

from collections.abc import Sequence

revision: str = "b2d4f6a80026"
down_revision: str | None = "a1c3e5f70026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
