"""A run's identity is (project, key).

Until now a run of a project other than ``default`` was stored under the key
``<project>:<key>``, unique over every project. Project names may hold ``:``, so a token of
one project could post a key that reads as another project's and block that project's own
upload for good. The key is now the one the client sent, unique within its project.

Upgrade: a run of a non-default project whose key starts with ``<its own project>:`` gets
that prefix taken off (a prefix naming another project, or a default run's key, is the
client's own text and stays), unless the project holds the plain key already. A key that was
too long with its prefix was stored cut and hashed (``fit``): it is split the same way, and a
retry of such a run after the upgrade makes a new run. ``run.key`` is referenced by no
foreign key (``result``, partitioned on Postgres, refers to ``run_id`` only).

Downgrade: the prefix goes back on; it fails where two projects hold keys that the prefix
makes equal, or where a prefixed key no longer fits the column (merging identities is no
downgrade).

Revision ID: a1c3e5f70026
Revises: 6d2f9b4e8a17
Create Date: 2026-12-04 00:00:00.000000
"""

from collections.abc import Sequence

from alembic import op

revision: str = "a1c3e5f70026"
down_revision: str | None = "6d2f9b4e8a17"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# ``substr`` and ``length`` count characters alike on both dialects (1-based ``substr``).
SPLIT = """
UPDATE run SET key = substr(key, length(project) + 2)
WHERE project <> 'default'
  AND substr(key, 1, length(project) + 1) = project || ':'
  AND NOT EXISTS (
    SELECT 1 FROM run AS plain
    WHERE plain.project = run.project AND plain.key = substr(run.key, length(run.project) + 2)
  )
"""
JOIN = "UPDATE run SET key = project || ':' || key WHERE project <> 'default'"


# The keys change between the two constraints (a split key may equal another project's).
def upgrade() -> None:
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.drop_constraint("uq_run_key", type_="unique")
    op.execute(SPLIT)
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.create_unique_constraint(batch_op.f("uq_run_project_key"), ["project", "key"])


def downgrade() -> None:
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.drop_constraint("uq_run_project_key", type_="unique")
    op.execute(JOIN)
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.create_unique_constraint(batch_op.f("uq_run_key"), ["key"])
