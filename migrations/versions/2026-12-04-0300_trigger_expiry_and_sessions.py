"""Triggers expire; sign-in sessions end.

(A placeholder in the chain; filled in by the change that needs it.)

Revision ID: c3e5a7b90026
Revises: b2d4f6a80026
Create Date: 2026-12-04 00:00:00.000000
"""

from collections.abc import Sequence

revision: str = "c3e5a7b90026"
down_revision: str | None = "b2d4f6a80026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
