"""Each result's within-run spread, stored beside it for detection to read with the history.

``result.spread`` and ``invalidated_result.spread``: the samples' median absolute deviation
over their median (``app.core.spread``), null without 3 samples. Filled here for the rows
stored before, in batches, so that shape detection sees their spread too.

Revision ID: a3c5e7f90035
Revises: f2b4d6e80034
Create Date: 2026-12-06 08:00:00.000000
"""

import json
import math
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "a3c5e7f90035"
down_revision: str | None = "f2b4d6e80034"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("result", "invalidated_result")
BATCH = 5000


def upgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column("spread", sa.Float(), nullable=True))
    connection = op.get_bind()
    for table in TABLES:
        _fill(connection, table)


def _fill(connection: sa.Connection, table: str) -> None:
    """Compute the spread of every stored ok result with samples, a batch at a time.

    Batches follow the key (run, series), so memory stays one batch whatever the table's size.
    """
    select = sa.text(
        f"SELECT run_id, series_id, samples FROM {table} "
        "WHERE status = 'ok' AND samples IS NOT NULL "
        "AND (run_id > :run_id OR (run_id = :run_id AND series_id > :series_id)) "
        "ORDER BY run_id, series_id LIMIT :batch"
    )
    update = sa.text(
        f"UPDATE {table} SET spread = :spread WHERE run_id = :run_id AND series_id = :series_id"
    )
    last = {"run_id": 0, "series_id": 0}
    while rows := connection.execute(select, {**last, "batch": BATCH}).fetchall():
        filled = []
        for run_id, series_id, samples in rows:
            values = json.loads(samples) if isinstance(samples, str) else samples
            spread = _spread(values) if isinstance(values, list) else None
            if spread is not None:
                filled.append({"spread": spread, "run_id": run_id, "series_id": series_id})
        if filled:
            connection.execute(update, filled)
        last = {"run_id": rows[-1][0], "series_id": rows[-1][1]}


def _spread(samples: list[Any]) -> float | None:
    """``app.core.spread.relative_spread`` as of this revision (a migration stays as it ran)."""
    if len(samples) < 3 or not all(isinstance(v, int | float) for v in samples):
        return None
    ordered = sorted(float(v) for v in samples)
    median = _median(ordered)
    if median == 0 or not math.isfinite(median):
        return None
    return _median(sorted(abs(v - median) for v in ordered)) / abs(median)


def _median(ordered: list[float]) -> float:
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def downgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column("spread")
