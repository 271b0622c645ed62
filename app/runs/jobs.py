"""The runs' daily upkeep, as a background job: partitions ahead of time."""

import logging

from app.core.db import Database
from app.runs import partitions

log = logging.getLogger(__name__)


def keep_up_partitions(database: Database, per_pass: int = 24, months_back: int = 120) -> list[str]:
    """Postgres: make the months ahead's partitions of ``result`` (``app.runs.partitions``)."""
    with database.session_scope() as session:
        made = partitions.keep_up(session, per_pass=per_pass, months_back=months_back)
    if made:
        log.info("partitions made: %s", ", ".join(made))
    return made
