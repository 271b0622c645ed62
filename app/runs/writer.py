"""Write a run's result rows in bulk: COPY on Postgres, executemany on SQLite.

COPY's text format is built here as one string (PostgreSQL docs, "COPY", File Formats: Text
Format): tab-separated columns, a backslash-N for NULL, and backslash, tab, newline and carriage
return escaped inside values. Built directly, it skips psycopg's per-row adaptation, which
dominates for runs of thousands of results.
"""

import json
from datetime import datetime
from typing import Any

from pydantic_core import to_json
from sqlalchemy.orm import Session

from app.core.bulk import is_postgres, table_of
from app.runs.models import Result

# One result as written, in COLUMNS order; the run's columns come from the writer's call.
# A plain tuple: a NamedTuple per result costs more to build than the row's COPY text.
ResultRow = tuple[
    int,
    str,
    float | None,
    list[float] | None,
    str | None,
    str,
    dict[str, Any] | None,
    float | None,
]
COLUMNS = ("series_id", "status", "value", "samples", "text_value", "reason", "extra", "spread")

_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
_NULL = "\\N"


def write_results(
    session: Session, run_id: int, measured_at: datetime, rows: list[ResultRow]
) -> None:
    """Insert every row of one run in the session's transaction."""
    if not rows:
        return
    if not is_postgres(session):
        run_columns = {"run_id": run_id, "measured_at": measured_at}
        session.execute(
            table_of(Result).insert(),
            [{**run_columns, **dict(zip(COLUMNS, row, strict=True))} for row in rows],
        )
        return
    cursor = session.connection().connection.driver_connection.cursor()  # type: ignore[union-attr]
    columns = ", ".join(("run_id", "measured_at", *COLUMNS))
    with cursor.copy(f"COPY result ({columns}) FROM STDIN") as copy:
        copy.write(copy_text(run_id, measured_at, rows))


def copy_text(run_id: int, measured_at: datetime, rows: list[ResultRow]) -> str:
    """The rows in COPY text format, the run's columns first."""
    prefix = f"{run_id}\t{measured_at.isoformat()}\t"
    values = _numbers([row[2] for row in rows])
    spreads = _numbers([row[7] for row in rows])
    return "".join(
        [
            f"{prefix}{series_id}\t{status}\t{value}\t{_samples(samples)}"
            f"\t{_NULL if text is None else text.translate(_ESCAPES)}"
            f"\t{reason.translate(_ESCAPES) if reason else ''}"
            f"\t{_NULL if extra is None else json.dumps(extra).translate(_ESCAPES)}"
            f"\t{spread}\n"
            for (series_id, status, _, samples, text, reason, extra, _), value, spread in zip(
                rows, values, spreads, strict=True
            )
        ]
    )


def _numbers(values: list[float | None]) -> list[str]:
    """The COPY text of each number, from one JSON array written by pydantic-core.

    One call formats every value (shortest round-trip), instead of one ``repr`` per value;
    the texts differ only in spelling (``1e-05`` becomes ``0.00001``), never in value.
    """
    return to_json(values).decode()[1:-1].replace("null", _NULL).split(",")


def _samples(samples: list[float] | None) -> str:
    # Finite floats only (validated at the edge), so the JSON array holds no NaN or null.
    return _NULL if samples is None else to_json(samples).decode()
