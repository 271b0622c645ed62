"""The catalog generation: a token that changes when remembered catalog ids may be wrong.

Servers remember benchmark and series ids across requests (``app.benchmarks.known_ids``) and
forget them when this token changes. The application changes it when it creates benchmarks or
series; the triggers below change it when anyone deletes them, truncates their tables or
changes the columns that identify them.

SQLite drops a table's triggers when a batch migration recreates the table: a later migration
that recreates ``benchmark`` or ``series`` must create these triggers again
(``tests/benchmarks/test_known_ids.py`` fails without them).

Revision ID: 9d1f4c2b7e60
Revises: 3b9e7d21c4a5
Create Date: 2026-11-30 06:40:00.000000
"""

import secrets
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "9d1f4c2b7e60"
down_revision: str | None = "3b9e7d21c4a5"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# table: the columns that identify its rows (an update of any of them changes the token)
KEYS = {
    "benchmark": "id, fingerprint",
    "series": "id, benchmark_id, metric_id, machine_id, channel",
}
NEW_TOKEN = {
    "postgresql": "md5(random()::text || clock_timestamp()::text)",
    "sqlite": "lower(hex(randomblob(16)))",
}


def upgrade() -> None:
    op.create_table(
        "catalog_generation",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("token", sa.String(length=32), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_catalog_generation")),
    )
    op.execute(f"INSERT INTO catalog_generation (id, token) VALUES (1, '{secrets.token_hex(16)}')")
    dialect = op.get_bind().dialect.name
    bump = f"UPDATE catalog_generation SET token = {NEW_TOKEN[dialect]}"
    if dialect == "postgresql":
        op.execute(
            "CREATE FUNCTION catalog_generation_bump() RETURNS trigger LANGUAGE plpgsql AS "
            f"$$ BEGIN {bump}; RETURN NULL; END $$"
        )
        for table, keys in KEYS.items():
            op.execute(
                f"CREATE TRIGGER {table}_changes_generation "
                f"AFTER DELETE OR TRUNCATE OR UPDATE OF {keys} ON {table} "
                "FOR EACH STATEMENT EXECUTE FUNCTION catalog_generation_bump()"
            )
        return
    for table, keys in KEYS.items():
        op.execute(
            f"CREATE TRIGGER {table}_deleted_changes_generation AFTER DELETE ON {table} "
            f"BEGIN {bump}; END"
        )
        op.execute(
            f"CREATE TRIGGER {table}_rekeyed_changes_generation AFTER UPDATE OF {keys} "
            f"ON {table} BEGIN {bump}; END"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table in KEYS:
            op.execute(f"DROP TRIGGER {table}_changes_generation ON {table}")
        op.execute("DROP FUNCTION catalog_generation_bump()")
    else:
        for table in KEYS:
            op.execute(f"DROP TRIGGER {table}_deleted_changes_generation")
            op.execute(f"DROP TRIGGER {table}_rekeyed_changes_generation")
    op.drop_table("catalog_generation")
