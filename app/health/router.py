"""Liveness and readiness probes."""

import logging
import math
import threading
import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from kombu import Connection
from sqlalchemy import text

from app.core.config import Settings
from app.core.db import Database
from app.core.migrate import is_up_to_date

router = APIRouter(tags=["health"])
log = logging.getLogger(__name__)

# /readyz is anonymous: the broker's answer is kept this long, so a flood of probes opens one
# broker connection per BROKER_CHECK_KEEP_S, not one per hit (a probe comes every 5-10 s).
BROKER_CHECK_KEEP_S = 5.0
_creating = threading.Lock()


class BrokerCheck:
    """One app's last answer from its broker (an app's own: another app, another broker)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()  # one check at a time: concurrent probes wait for it
        self.at = -math.inf
        self.answer = ""

    def answer_for(self, url: str) -> str:
        """The broker's check, made again once the last one is ``BROKER_CHECK_KEEP_S`` old."""
        with self.lock:
            if time.monotonic() - self.at >= BROKER_CHECK_KEEP_S:
                self.answer, self.at = _check_broker(url), time.monotonic()
            return self.answer


def _broker_check(state: Any) -> BrokerCheck:
    with _creating:
        if not hasattr(state, "broker_check"):
            state.broker_check = BrokerCheck()
        check: BrokerCheck = state.broker_check
        return check


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz", responses={503: {"description": "a dependency is not ready"}})
def readyz(request: Request) -> JSONResponse:
    """The database answers and is migrated; the broker answers when one is configured."""
    database: Database = request.app.state.database
    settings: Settings = request.app.state.settings
    checks: dict[str, Any] = {"database": _check_database(database)}
    if settings.BROKER_URL:
        checks["broker"] = _broker_check(request.app.state).answer_for(settings.BROKER_URL)
    ready = all(c == "ok" for c in checks.values())
    return JSONResponse(
        {"status": "ok" if ready else "unavailable", "checks": checks},
        status_code=200 if ready else 503,
    )


def _check_database(database: Database) -> str:
    try:
        with database.engine.connect() as connection:
            connection.execute(text("SELECT 1"))
        return "ok" if is_up_to_date(database.engine) else "not migrated: run benchwatch migrate"
    except Exception:  # any failure is "not ready", logged, never raised
        log.exception("readiness: the database does not answer")
        return "error: the database does not answer (the server's log says why)"


def _check_broker(url: str) -> str:
    try:
        with Connection(url, connect_timeout=2) as connection:
            connection.ensure_connection(max_retries=1, timeout=2)
        return "ok"
    except Exception:  # the exception text names hosts and credentials: log, don't answer
        log.exception("readiness: the broker does not answer")
        return "error: the broker does not answer (the server's log says why)"
