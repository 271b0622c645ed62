"""The runs' daily upkeep, as a background job: partitions ahead of time."""

import logging

from app.core.db import Database
from app.runs import partitions

log = logging.getLogger(__name__)


def keep_up_partitions(database: Database) -> list[str]:
    """Postgres: make the months ahead's partitions of ``result`` (``app.runs.partitions``)."""
    with database.session_scope() as session:
        made = partitions.keep_up(session)
    if made:
        log.info("partitions made: %s", ", ".join(made))
    return made
