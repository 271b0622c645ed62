"""A run records the repository's default branch.

(A placeholder in the chain; filled in by the change that needs it.)

Revision ID: d4f6b8c00026
Revises: c3e5a7b90026
Create Date: 2026-12-04 00:00:00.000000
"""

from collections.abc import Sequence

revision: str = "d4f6b8c00026"
down_revision: str | None = "c3e5a7b90026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
