"""The runs' daily upkeep, as background jobs: partitions ahead of time, then retention."""

import logging

from app.core.db import Database
from app.runs import partitions, retention

log = logging.getLogger(__name__)


def keep_up_partitions(database: Database) -> list[str]:
    """Postgres: make the months ahead's partitions of ``result`` (``app.runs.partitions``)."""
    with database.session_scope() as session:
        made = partitions.keep_up(session)
    if made:
        log.info("partitions made: %s", ", ".join(made))
    return made


def apply_retention(
    database: Database, samples_days: int, branch_runs_days: int
) -> retention.Swept:
    """Clear old samples and delete old branch runs as the settings say (``app.runs.retention``)."""
    swept = retention.apply_retention(database, samples_days, branch_runs_days)
    log.info("retention: %s", swept.summary())
    return swept
