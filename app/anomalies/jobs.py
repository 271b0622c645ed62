"""Anomaly jobs: the bodies of the Celery tasks and of the in-process runner."""

import logging

from app.anomalies import service
from app.anomalies.service import Thresholds
from app.core.db import Database

log = logging.getLogger(__name__)


def detect_run(database: Database, thresholds: Thresholds, *, run_id: int) -> None:
    """Detect steps after a run was ingested; safe to repeat (findings are not duplicated)."""
    with database.session_scope() as session:
        found = service.detect_for_run(session, run_id, thresholds)
        log.info(
            "run %s: %d new finding(s), %d reverted",
            run_id,
            len(found.regressions),
            len(found.reverted),
        )
