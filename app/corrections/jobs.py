"""Retention, as a background job (the settings say how long what is kept)."""

import logging

from app.core.db import Database
from app.corrections import retention

log = logging.getLogger(__name__)


def apply_retention(
    database: Database, samples_days: int, branch_runs_days: int
) -> retention.Swept:
    """Clear old samples and delete old branch runs as the settings say (``retention``)."""
    swept = retention.apply_retention(database, samples_days, branch_runs_days)
    log.info("retention: %s", swept.summary())
    return swept
