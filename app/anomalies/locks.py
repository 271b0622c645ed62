"""The lock that makes detections of one machine and channel take turns (on Postgres)."""

import zlib

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.runs.models import Run

DETECTION_LOCK = 0x62770001  # the advisory lock class of detection ("bw", 1)


def hold_machine_channel(session: Session, run: Run) -> None:
    """Detections of one machine and channel take turns on Postgres, until the transaction ends.

    Two runs of the same series detected at once would each find the step missing and record
    it twice; in turn, the second sees what the first recorded (a transaction-level advisory
    lock on machine and channel). A confirmation re-run's verdict takes its turn too, so that
    neither overwrites the other's verdict on a suspected step. SQLite has one writer at a
    time: the second detection's write fails instead (a stale snapshot, or the unique step),
    and ``jobs.detect_run`` runs it again. Holding SQLite's write lock for the whole detection
    would make every upload wait for it.
    """
    if session.get_bind().dialect.name == "postgresql":
        key = zlib.crc32(f"{run.machine_id}:{run.channel}".encode()) - 2**31  # a signed int4
        session.execute(select(func.pg_advisory_xact_lock(DETECTION_LOCK, key)))
