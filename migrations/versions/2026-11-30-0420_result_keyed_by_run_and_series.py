"""A result is keyed by its run and series; the surrogate id and its index go.

Every COPY of a run's results maintained three btree indexes; the ``id`` one served nothing a
read needs. (run, series) was unique already: it becomes the primary key.

Revision ID: 3b9e7d21c4a5
Revises: ae463a1c7099
Create Date: 2026-11-30 04:20:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "3b9e7d21c4a5"
down_revision: str | None = "ae463a1c7099"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.drop_constraint("pk_result", "result", type_="primary")
        op.drop_column("result", "id")
        op.drop_constraint("uq_result_run_id_series_id", "result", type_="unique")
        op.create_primary_key("pk_result", "result", ["run_id", "series_id"])
        return
    with op.batch_alter_table("result", recreate="always") as batch_op:
        batch_op.drop_constraint("uq_result_run_id_series_id", type_="unique")
        batch_op.drop_column("id")
        batch_op.create_primary_key("pk_result", ["run_id", "series_id"])


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.drop_constraint("pk_result", "result", type_="primary")
        op.create_unique_constraint("uq_result_run_id_series_id", "result", ["run_id", "series_id"])
        op.execute("ALTER TABLE result ADD COLUMN id SERIAL")  # numbers the existing rows
        op.create_primary_key("pk_result", "result", ["id"])
        return
    with op.batch_alter_table("result", recreate="always") as batch_op:
        batch_op.drop_constraint("pk_result", type_="primary")
        batch_op.add_column(sa.Column("id", sa.Integer(), nullable=True))  # SQLite numbers them
        batch_op.create_primary_key("pk_result", ["id"])
        batch_op.create_unique_constraint("uq_result_run_id_series_id", ["run_id", "series_id"])
