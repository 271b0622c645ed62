"""The localization task: a finding's machine's worker searches what change caused it.

``bench.localize`` (``app.jobs``) runs on the machine's queue. It starts the localization under
a lease (``app.localization.lifecycle``; a message delivered again for one running elsewhere
or finished does nothing), runs the search of ``workers.localize`` with this worker's provider,
command suites and clones, stores each probe as it is judged, and finishes it. The lease is
renewed while the search prepares and measures; an attempt that loses it (its lease lapsed
and another worker took it over) stops without writing. Anything else that goes wrong fails
the localization with the reason, as a shard's failure does, never silently.

Queued localizations whose message was lost, and running ones whose worker died, are sent
again by the shard sweep (``bench.requeue_shards``, ``requeue_localizations``): every few
minutes, and for a machine when its worker starts.
"""

import logging
import time
from typing import Any

from celery import Task

from app.core.config import settings
from app.jobs import LOCALIZE, TASKS
from app.localization import lifecycle
from app.localization.lifecycle import Costs, ProbeRow
from app.localization.models import Localization
from workers.celery_app import declared
from workers.localize import Found, Oracle, Search, Stopped
from workers.providers import UnknownProvider
from workers.repro import measuring, suite_of
from workers.tasks.jobs import worker_database
from workers.tasks.suite import node_name

log = logging.getLogger(__name__)


class Lease:
    """This attempt's hold on a localization, renewed at most every third of its length."""

    def __init__(self, localization_id: int, lease: str, lease_s: float) -> None:
        """Hold ``localization_id`` under ``lease`` (renewed for ``lease_s`` each time)."""
        self.localization_id, self.lease, self.lease_s = localization_id, lease, lease_s
        self.every_s = lease_s / 3
        self.renewed = time.monotonic()
        self.lost = False

    def beat(self) -> bool:
        """Renew the lease when due; False once it is another attempt's."""
        if self.lost:
            return False
        if time.monotonic() - self.renewed >= self.every_s:
            with worker_database().session_scope() as session:
                self.lost = not lifecycle.renew(
                    session, self.localization_id, self.lease, self.lease_s
                )
            self.renewed = time.monotonic()
        return not self.lost

    def record(self, probe: ProbeRow, costs: Costs) -> None:
        """Store a probe; the attempt stops if the localization is no longer its own."""
        with worker_database().session_scope() as session:
            held = lifecycle.record_probe(session, self.localization_id, self.lease, probe, costs)
        if not held:
            self.lost = True
            raise Stopped(f"localization {self.localization_id}: the lease was lost")
        self.renewed = time.monotonic()


@declared(LOCALIZE, bind=True)
def localize(self: Task[Any, Any], *, localization_id: int, machine: str) -> str:
    """Search the cause of one finding on this machine; what became of the message."""
    node = node_name(self.request.hostname)
    with worker_database().session_scope() as session:
        claim = lifecycle.start(session, localization_id, node, settings.SHARD_LEASE_S)
        asked = _asked(claim.localization)
    if claim.outcome != "started":
        log.info("localization %s on %s: %s, not started", localization_id, machine, claim.outcome)
        return claim.outcome
    if claim.taken_over:
        log.warning("localization %s: its earlier worker stopped; starting over", localization_id)
    lease = Lease(localization_id, claim.lease, settings.SHARD_LEASE_S)
    try:
        found = _search(asked, lease)
    except Stopped as stopped:
        log.warning("localization %s stopped: %s", localization_id, stopped)
        return "stopped"
    except Exception as error:
        log.exception("localization %s failed", localization_id)
        found = Found("failed", f"the search failed: {type(error).__name__}: {error}", {}, Costs())
        _finish(localization_id, lease, found, keep_costs=True)
        return "failed"
    _finish(localization_id, lease, found)
    log.info("localization %s: %s (%s)", localization_id, found.state, found.reason)
    return found.state


def _asked(localization: Localization) -> dict[str, Any]:
    """What the search needs of the row, read inside its transaction."""
    return {
        "machine": localization.machine,
        "case": dict(localization.case),
        "good": dict(localization.good_environment),
        "bad": dict(localization.bad_environment),
    }


def _search(asked: dict[str, Any], lease: Lease) -> Found:
    suite = suite_of(asked["case"], settings)
    if isinstance(suite, str):
        return Found("failed", suite, {}, Costs())
    measured_with = measuring(
        suite, asked["machine"], settings, heartbeat=lease.beat, every_s=lease.every_s
    )
    search = Search(
        Oracle(measured_with, asked["case"]),
        asked["good"],
        asked["bad"],
        settings.LOCALIZE_SOURCES,
        lease.record,
    )
    try:
        return search.run()
    except UnknownProvider as error:
        return Found("failed", str(error), {}, search.oracle.costs(search.probe_count))


def _finish(localization_id: int, lease: Lease, found: Found, keep_costs: bool = False) -> None:
    with worker_database().session_scope() as session:
        lifecycle.finish(
            session,
            localization_id,
            lease.lease,
            state=found.state,
            reason=found.reason,
            answer=found.answer,
            costs=None if keep_costs else found.costs,
        )


def requeue_localizations(machine: str | None = None) -> int:
    """Send each unfinished localization again; how many.

    A queued one now, a running one for when its lease lapses (the attempt holding it ignores
    the message).
    """
    with worker_database().session_scope() as session:
        stale = [
            (found.id, found.machine, wait)
            for found, wait in lifecycle.stale_localizations(session, machine)
        ]
    for localization_id, on, wait in stale:
        localize.apply_async(
            kwargs={"localization_id": localization_id, "machine": on},
            queue=TASKS.queue_for(LOCALIZE, machine=on),
            countdown=wait + 1 if wait else 0,
        )
    return len(stale)
