"""Write a run's result rows in bulk: COPY on Postgres, executemany on SQLite.

COPY's text format is built here as one string (PostgreSQL docs, "COPY", File Formats: Text
Format): tab-separated columns, a backslash-N for NULL, and backslash, tab, newline and carriage
return escaped inside values. Building it directly is several times faster than handing
psycopg one row at a time, which matters for runs of thousands of results.
"""

import json
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy.orm import Session

from app.core.bulk import is_postgres, table_of
from app.runs.models import Result

_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


class ResultRow(NamedTuple):
    """One result as written: the run's columns come from the writer's call."""

    series_id: int
    status: str
    value: float | None
    samples: list[float] | None
    text_value: str | None
    reason: str
    extra: dict[str, Any] | None


def write_results(
    session: Session, run_id: int, measured_at: datetime, rows: list[ResultRow]
) -> None:
    """Insert every row of one run in the session's transaction."""
    if not rows:
        return
    if not is_postgres(session):
        session.execute(
            table_of(Result).insert(),
            [{"run_id": run_id, "measured_at": measured_at, **row._asdict()} for row in rows],
        )
        return
    cursor = session.connection().connection.driver_connection.cursor()  # type: ignore[union-attr]
    columns = "run_id, measured_at, series_id, status, value, samples, text_value, reason, extra"
    with cursor.copy(f"COPY result ({columns}) FROM STDIN") as copy:
        copy.write(copy_text(run_id, measured_at, rows))


def copy_text(run_id: int, measured_at: datetime, rows: list[ResultRow]) -> str:
    """The rows in COPY text format, the run's columns first."""
    prefix = f"{run_id}\t{measured_at.isoformat()}\t"
    return "".join(
        f"{prefix}{row.series_id}\t{row.status}\t{_number(row.value)}\t{_samples(row.samples)}"
        f"\t{_text(row.text_value)}\t{_text(row.reason)}\t{_json(row.extra)}\n"
        for row in rows
    )


def _number(value: float | None) -> str:
    return "\\N" if value is None else repr(value)


def _samples(samples: list[float] | None) -> str:
    # Finite floats only (validated at the edge), whose repr is valid JSON.
    return "\\N" if samples is None else "[" + ",".join(map(repr, samples)) + "]"


def _text(value: str | None) -> str:
    return "\\N" if value is None else value.translate(_ESCAPES)


def _json(value: dict[str, Any] | None) -> str:
    return "\\N" if value is None else json.dumps(value).translate(_ESCAPES)
