"""Suite tasks: start a run on a machine, run its shards, close it; and find shards left behind.

``app.jobs`` declares them (names, queues, options): they run on the machine's own queue,
consumed by ``benchwatch worker --machine <machine>`` one task at a time (one shard per device
at a time). Several such workers, each its own ``--node``, serve one machine as a pool: each
takes the next shard when it is free (one message reserved at a time, acknowledged when done).
torch is imported inside the tasks only, so a service-only worker starts without it.
"""

import logging
import socket
from collections.abc import Callable
from typing import Any

from celery import Task
from celery.signals import worker_ready

from app.anomalies import confirmation
from app.core.command_suites import CommandSuite, command_name
from app.core.config import settings
from app.core.db import utcnow
from app.jobs import REQUEUE_SHARDS, RUN_SHARD, START_SUITE, TASKS
from app.suite_runs import compare_reruns, pinned, service, triggers
from app.suite_runs.models import SuiteRun
from workers.celery_app import declared
from workers.command_suite import plan_command_shards, run_command_shard
from workers.compiler_settings import recorded_settings
from workers.shard_runner import ShardOutcome, run_shard_process, worker_environment
from workers.tasks.jobs import worker_database

log = logging.getLogger(__name__)


@declared(START_SUITE, bind=True)
def start_suite(
    self: Task[Any, Any],
    *,
    machine: str,
    tier: str,
    channel: str = "nightly",
    trigger: str = "schedule",
    models: list[str] | None = None,
    suite_run_id: int | None = None,
) -> int:
    """Describe this machine, plan the tier's shards and queue them; a redelivery reuses the run.

    ``suite_run_id``: a suite run triggered over the API, queued and waiting to be adopted.
    """
    from workers.environment import describe_environment, describe_machine

    description = {
        "machine": describe_machine(machine).model_dump(mode="json", exclude_none=True),
        "environment": describe_environment(channel).model_dump(mode="json", exclude_none=True),
    }
    if (name := command_name(tier)) is not None:  # a command suite of this worker's settings
        try:
            command = command_suite(name)
        except ValueError as error:
            if suite_run_id is not None:  # triggered: it fails, instead of waiting for ever
                _fail_queued(suite_run_id, str(error))
            raise
        shards = plan_command_shards(name, command)
        description["extra"] = {"command": {"name": name, **command.model_dump(exclude={"env"})}}
        # The command's compiler settings are its environment's: the suite's variables too.
        description["environment"]["compiler_options"] = recorded_settings(
            worker_environment() | command.env
        )
    else:
        from workers.tiers import plan_shards

        shards = plan_shards(tier, models)
    with worker_database().session_scope() as session:
        if suite_run_id is not None:
            suite_run = triggers.adopt_suite_run(session, suite_run_id, description, shards)
        else:
            suite_run = service.open_suite_run(
                session,
                key=f"suite-{machine}-{tier}-{self.request.id}",
                machine=machine,
                tier=tier,
                trigger=trigger,
                description=description,
                shards=shards,
            )
        suite_run_id = suite_run.id
        pending = [shard.id for shard in suite_run.shards if shard.status == "pending"]
    for shard_id in pending:
        queue_shard(shard_id, machine)
    log.info("suite run %s: %d shards queued on %s", suite_run_id, len(pending), machine)
    return suite_run_id


@declared(RUN_SHARD, bind=True)
def run_shard(self: Task[Any, Any], *, shard_id: int) -> None:
    """Run one shard under a lease; retry a failed attempt; close the run after the last one.

    A shard of a confirmation or compare re-run runs only while this machine's stack is
    still its run's; a confirmation is then pooled into that run, a compare re-run kept as
    evidence beside it; neither is ingested.
    """
    node = node_name(self.request.hostname)
    with worker_database().session_scope() as session:
        claim = service.claim_shard(session, shard_id, node, settings.SHARD_LEASE_S)
        lease = claim.lease
        tier = claim.shard.suite_run.tier
        spec = {"tier": tier, "cases": claim.shard.cases}
        position, described = claim.shard.position, claim.shard.suite_run.description
        attempt, suite_run_id = claim.shard.attempts, claim.shard.suite_run_id
        rerun = claim.shard.suite_run
        suspect = confirmation.suspect_environment(rerun)
        compared = compare_reruns.pinned_environment(rerun)
    if claim.outcome == "busy":  # another worker holds it: look again when its lease lapses
        raise self.retry(countdown=claim.wait_s + 1)
    if claim.outcome == "claimed" and not _environment_changed(suite_run_id, suspect, compared):
        heartbeat, every_s = (lambda: _renew(shard_id, lease)), settings.SHARD_LEASE_S / 3
        if (name := command_name(tier)) is not None:
            outcome = _run_command(name, position, described, heartbeat, every_s)
        else:
            outcome = run_shard_process(
                spec, timeout_s=settings.SHARD_TIMEOUT_S, heartbeat=heartbeat, every_s=every_s
            )
        if outcome.rows is None and outcome.retry and attempt < settings.SHARD_ATTEMPTS:
            _release(shard_id, lease, outcome.reason)
            raise self.retry(countdown=min(10 * attempt, 60))
        _finish(shard_id, lease, outcome, attempt)
    with worker_database().session_scope() as session:
        if suspect is not None:
            confirmation.finish_rerun(session, suite_run_id)
        elif compared is not None:
            compare_reruns.finish(session, suite_run_id)
        else:
            service.finalize(session, suite_run_id, settings.POOL_DRIFT_THRESHOLD)


@declared(REQUEUE_SHARDS)
def requeue_shards(*, machine: str | None = None) -> int:
    """Queue again every unfinished shard, for when the lease it waits on lapses.

    Unfinished localizations are found again the same way (``workers.tasks.localize``).
    """
    from workers.tasks.localize import requeue_localizations  # it imports this module

    with worker_database().session_scope() as session:
        stale = [
            (shard.id, shard.suite_run.machine, wait)
            for shard, wait in service.stale_shards(session, machine)
        ]
    for shard_id, shard_machine, wait in stale:
        queue_shard(shard_id, shard_machine, countdown=wait + 1)
    return len(stale) + requeue_localizations(machine)


def node_name(hostname: str | None) -> str:
    """The node a worker's Celery name names (``machine@node``); outside a worker, this host's.

    ``benchwatch worker --machine M --node N`` names itself ``M@N``: the nodes of a pool
    consume the one queue of M, and each shard records which node ran it.
    """
    if hostname:
        return hostname.rpartition("@")[2]
    return settings.NODE or socket.gethostname()


def queue_shard(shard_id: int, machine: str, countdown: float = 0) -> None:
    """Send a shard to its machine's worker (``countdown``: not before this many seconds)."""
    queue = TASKS.queue_for(RUN_SHARD, machine=machine)
    run_shard.apply_async(kwargs={"shard_id": shard_id}, queue=queue, countdown=countdown)


def command_suite(name: str) -> CommandSuite:
    """This worker's command suite ``name`` (``BENCHWATCH_COMMAND_SUITES``).

    Raises:
        ValueError: this worker's settings do not define it.
    """
    if name not in settings.COMMAND_SUITES:
        known = ", ".join(settings.COMMAND_SUITES) or "none"
        raise ValueError(
            f"no command suite {name!r} in this worker's BENCHWATCH_COMMAND_SUITES ({known})"
        )
    return settings.COMMAND_SUITES[name]


def _fail_queued(suite_run_id: int, reason: str) -> None:
    """A triggered suite run this worker cannot start is failed with why (if still queued)."""
    with worker_database().session_scope() as session:
        suite_run = session.get(SuiteRun, suite_run_id, with_for_update=True)
        if suite_run is not None and suite_run.status == triggers.QUEUED:
            suite_run.status, suite_run.reason, suite_run.finished_at = "failed", reason, utcnow()


def _run_command(
    name: str,
    position: int,
    described: dict[str, Any],
    heartbeat: Callable[[], bool],
    every_s: float,
) -> ShardOutcome:
    """Shard ``position`` of command suite ``name``, on the machine the run describes."""
    try:
        command = command_suite(name)
    except ValueError as error:  # removed from the settings since the run started
        return ShardOutcome(None, str(error), retry=False)
    machine = described.get("machine", {})
    return run_command_shard(
        command,
        index=position,
        machine=machine.get("name", ""),
        device=command.hints.device or machine.get("device", ""),
        timeout_s=settings.SHARD_TIMEOUT_S,
        heartbeat=heartbeat,
        every_s=every_s,
        max_bytes=settings.MAX_BODY_BYTES,
        parse_timeout_s=settings.PARSE_TIMEOUT_S,
    )


def _environment_changed(
    suite_run_id: int, suspect: dict[str, Any] | None, compared: dict[str, Any] | None
) -> bool:
    """Whether a re-run's stack differs from its run's; if so, the re-run is closed.

    ``suspect``: a confirmation re-run's stack, ``compared``: a compare re-run's (None: not one).
    """
    pinned_to = suspect or compared
    if pinned_to is None:
        return False
    from workers.environment import describe_environment

    here = describe_environment(pinned_to["channel"]).model_dump(mode="json")
    changes = pinned.environment_changes(pinned_to, here)
    if changes:
        log.warning("re-run %s not run: environment changed: %s", suite_run_id, changes)
        with worker_database().session_scope() as session:
            if suspect is not None:
                confirmation.skip_rerun(session, suite_run_id, changes)
            else:
                compare_reruns.skip(session, suite_run_id, changes)
    return bool(changes)


def _renew(shard_id: int, lease: str) -> bool:
    with worker_database().session_scope() as session:
        return service.renew_lease(session, shard_id, lease, settings.SHARD_LEASE_S)


def _release(shard_id: int, lease: str, reason: str) -> None:
    log.warning("shard %s failed, will retry: %s", shard_id, reason)
    with worker_database().session_scope() as session:
        service.release_shard(session, shard_id, lease, reason)


def _finish(shard_id: int, lease: str, outcome: ShardOutcome, attempt: int) -> None:
    reason = f"failed {attempt} times; last: {outcome.reason}" if outcome.rows is None else ""
    if outcome.rows is None and not outcome.retry:  # not tried again: it would fail the same way
        reason = f"failed (not retried): {outcome.reason}"
    with worker_database().session_scope() as session:
        service.finish_shard(session, shard_id, lease, outcome.rows, reason)


def watch_machine(machine: str) -> None:
    """When this worker is up, queue again the shards its machine left unfinished (a restart)."""

    def requeue(**_: Any) -> None:
        requeue_shards.apply_async(kwargs={"machine": machine})  # routed to the machine's queue

    worker_ready.connect(requeue, weak=False)
