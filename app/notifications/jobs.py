"""Notification jobs: what the tasks ``app.jobs`` declares for notices do."""

import logging
import time

from sqlalchemy.exc import IntegrityError, OperationalError

from app.core.config import Settings
from app.core.db import Database
from app.notifications import delivery, issue_sync
from app.notifications import dispatch as sweep

log = logging.getLogger(__name__)
ATTEMPTS = 5  # of a sweep that collides with a concurrent transaction


def dispatch(database: Database, settings: Settings) -> sweep.Swept:
    """The notice sweep (``dispatch.sweep``), run again when it collides with another writer.

    On SQLite a sweep that read before another transaction's commit cannot write; run
    again, it sees what the other committed (everything it does is idempotent).
    """
    for attempt in range(1, ATTEMPTS + 1):
        try:
            with database.session_scope() as session:
                swept = sweep.sweep(session, settings)
            if swept.sent or swept.queued or swept.planned:
                log.info("notices: %s", swept)
            return swept
        except (OperationalError, IntegrityError):
            if attempt == ATTEMPTS:
                raise  # the next sweep does it
            time.sleep(0.1 * attempt)
    raise AssertionError("unreachable")


def deliver(database: Database, settings: Settings, *, delivery_id: int) -> str:
    """One attempt of one delivery (``delivery.deliver``)."""
    state = delivery.deliver(database, settings, delivery_id)
    log.info("delivery %s: %s", delivery_id, state)
    return state


def poll_issues(database: Database, settings: Settings) -> list[int]:
    """Read linked GitHub issues' state (``issue_sync.poll``); the groups it triaged."""
    changed = issue_sync.poll(database, settings)
    if changed:
        log.info("GitHub issues: groups %s triaged", changed)
    return changed
