"""A run's identity is (project, key).

(A placeholder in the chain; filled in by the change that needs it.)

Revision ID: a1c3e5f70026
Revises: 6d2f9b4e8a17
Create Date: 2026-12-04 00:00:00.000000
"""

from collections.abc import Sequence

revision: str = "a1c3e5f70026"
down_revision: str | None = "6d2f9b4e8a17"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
