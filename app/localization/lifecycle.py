"""A localization's life on its machine's worker: started, its probes recorded, finished.

``request_localization`` (``service``) queues a localization and its suite run of trigger
``localize``; the worker's task ``bench.localize`` then

- starts it (``start``): the row locked, ``queued`` becomes ``running`` under a lease the
  worker renews while it measures (``renew``). A message delivered again finds it running
  under a live lease, or finished, and does nothing; one running under a lapsed lease (its
  worker died) is taken over and starts over, its probes dropped;
- records each probe as it is judged (``record_probe``), with what the search cost so far,
  so that the API shows its progress;
- finishes it (``finish``): its state (``culprit_found``, ``not_reproduced``,
  ``inconclusive``, ``failed``), why, the answer and the costs; its suite run is closed.

Only the attempt holding the lease may record or finish (a worker that lost its lease
learns it from a False and stops). Probes are evidence kept beside the finding: nothing here
writes a run, a result, a series or a baseline. ``stale_localizations`` lists what the sweep
sends again: localizations still queued (their message may be lost) and running ones, with
how long until their lease lapses.
"""

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.core.db import utcnow
from app.kernels import service as kernels
from app.localization.models import (
    FAILED,
    QUEUED,
    RUNNING,
    STATES,
    UNFINISHED,
    Localization,
    LocalizationProbe,
)
from app.localization.probing import ProbeRecord
from app.localization.service import LocalizationNotFound
from app.suite_runs.models import SuiteRun

FINISHED = tuple(state for state in STATES if state not in UNFINISHED)
REASON_CHARS = 4000
Outcome = Literal["started", "busy", "finished"]


@dataclass(frozen=True)
class Claim:
    """What starting a localization gave: it is this attempt's, another's, or over."""

    outcome: Outcome
    localization: Localization
    lease: str = ""  # "started": the attempt's lease id, which records and finishes it
    wait_s: float = 0.0  # "busy": until the other attempt's lease lapses
    taken_over: bool = False  # "started" from a lapsed lease: its probes were dropped


@dataclass(frozen=True)
class Costs:
    """What a localization has cost so far (the columns of the same names)."""

    probe_count: int = 0  # probes judged, references left out
    repeats: int = 0  # measurements of an environment beyond its first
    builds: int = 0  # environments prepared (those that failed to build included)
    samples: int = 0  # samples measured in all


@dataclass(frozen=True)
class ProbeRow:
    """One probe as stored: a judged probe or a reference, its samples and decision."""

    strategy: str  # preflight | isolate | bisect | settings
    label: str
    spec: Mapping[str, Any]
    outcome: str  # good | bad | halfway | unknown | build_failed | reference
    samples: Sequence[float]
    rounds: int
    reason: str
    p_good: float | None = None
    p_bad: float | None = None
    step_position: float | None = None
    effect: float | None = None
    # The case's kernel profile in the probe's environment, as its command's output gave it
    # (a payload's kernel_profiles[i], validated); None where it gave none.
    kernels: Mapping[str, Any] | None = None

    @classmethod
    def of(cls, strategy: str, record: ProbeRecord, spec: Mapping[str, Any]) -> "ProbeRow":
        """A strategy's probe record as a row (``spec``: how the probe names its environment)."""
        judged = record.judgement
        return cls(
            strategy=strategy,
            label=record.label,
            spec=spec,
            outcome=record.outcome,
            samples=record.samples,
            rounds=record.rounds,
            reason=record.reason,
            p_good=judged.p_good if judged else None,
            p_bad=judged.p_bad if judged else None,
            step_position=judged.position if judged else None,
            effect=judged.effect if judged else None,
        )


def start(session: Session, localization_id: int, worker: str, lease_s: float) -> Claim:
    """Take the localization for this attempt if it is queued or its lease lapsed."""
    found = _locked(session, localization_id)
    now = utcnow()
    if found.state in FINISHED:
        return Claim("finished", found)
    lapsed = found.lease_until is None or found.lease_until <= now
    if found.state == RUNNING and not lapsed:
        return Claim("busy", found, wait_s=_seconds_left(found.lease_until, now))
    taken_over = found.state == RUNNING
    if taken_over:  # its worker died: the search starts over, its measurements with it
        session.execute(
            delete(LocalizationProbe).where(LocalizationProbe.localization_id == found.id)
        )
        session.expire(found, ["probes"])
        _set_costs(found, Costs())
    lease = uuid.uuid4().hex
    found.state, found.worker, found.lease_id = RUNNING, worker, lease
    found.lease_until = now + timedelta(seconds=lease_s)
    found.started_at = now
    if (suite_run := _suite_run(session, found)) is not None:
        suite_run.status, suite_run.started_at = "running", now
        suite_run.description = {**suite_run.description, "node": worker}
    session.flush()
    return Claim("started", found, lease=lease, taken_over=taken_over)


def renew(session: Session, localization_id: int, lease: str, lease_s: float) -> bool:
    """Extend the attempt's lease; False when the localization is no longer this attempt's."""
    found = _locked(session, localization_id)
    if not _held_by(found, lease):
        return False
    found.lease_until = utcnow() + timedelta(seconds=lease_s)
    return True


def record_probe(
    session: Session, localization_id: int, lease: str, probe: ProbeRow, costs: Costs
) -> bool:
    """Store a probe (a strategy's label again: updated) and the costs; False when not held."""
    found = _locked(session, localization_id)
    if not _held_by(found, lease):
        return False
    row = session.scalar(
        select(LocalizationProbe).where(
            LocalizationProbe.localization_id == found.id,
            LocalizationProbe.strategy == probe.strategy,
            LocalizationProbe.label == probe.label[:256],
        )
    )
    if row is None:
        position = len(list(session.scalars(_probe_ids(found.id))))
        row = LocalizationProbe(localization_id=found.id, position=position)
        session.add(row)
    row.strategy, row.label, row.spec = probe.strategy, probe.label[:256], dict(probe.spec)
    row.outcome, row.samples, row.rounds = probe.outcome, list(probe.samples), probe.rounds
    row.reason = probe.reason[:REASON_CHARS]
    row.p_good, row.p_bad = probe.p_good, probe.p_bad
    row.step_position, row.effect = probe.step_position, probe.effect
    if probe.kernels is not None:  # kept as a run's profile is (merged under identities)
        profile = kernels.case_profile(0, probe.kernels)  # the case: the localization's
        row.kernel_profile = kernels.stored_profile(profile)
    row.measured_at = utcnow()
    _set_costs(found, costs)
    session.flush()
    return True


def finish(
    session: Session,
    localization_id: int,
    lease: str | None,
    *,
    state: str,
    reason: str,
    answer: Mapping[str, Any] | None = None,
    costs: Costs | None = None,
) -> bool:
    """Close the localization with its state, reason, answer and costs; and its suite run.

    ``lease`` None: a localization that could not start (queued, or this attempt's start
    failed before it held one) is failed without a lease. False when it is not this
    attempt's to close.
    """
    if state not in FINISHED:
        raise ValueError(f"a localization finishes in one of {', '.join(FINISHED)}, not {state}")
    found = _locked(session, localization_id)
    held = _held_by(found, lease) if lease is not None else found.state == QUEUED
    if not held:
        return False
    now = utcnow()
    found.state, found.reason = state, reason[:REASON_CHARS]
    # The environment diff it was asked with stays; the search's findings go beside it.
    found.answer = {**(found.answer or {}), **(answer or {})}
    if costs is not None:
        _set_costs(found, costs)
    found.finished_at, found.lease_until, found.lease_id = now, None, ""
    if (suite_run := _suite_run(session, found)) is not None:
        suite_run.status = "failed" if state == FAILED else "finished"
        suite_run.reason = reason[:REASON_CHARS] if state == FAILED else ""
        suite_run.finished_at = now
    session.flush()
    return True


def stale_localizations(
    session: Session, machine: str | None = None
) -> list[tuple[Localization, float]]:
    """Unfinished localizations and how long until each may be started (0: now)."""
    query = select(Localization).where(Localization.state.in_(UNFINISHED))
    if machine is not None:
        query = query.where(Localization.machine == machine)
    now = utcnow()
    return [
        (found, _seconds_left(found.lease_until, now) if found.state == RUNNING else 0.0)
        for found in session.scalars(query.order_by(Localization.id))
    ]


def _probe_ids(localization_id: int) -> Any:
    return select(LocalizationProbe.id).where(LocalizationProbe.localization_id == localization_id)


def _locked(session: Session, localization_id: int) -> Localization:
    found = session.get(Localization, localization_id, with_for_update=True, populate_existing=True)
    if found is None:
        raise LocalizationNotFound(localization_id)
    return found


def _held_by(found: Localization, lease: str | None) -> bool:
    return found.state == RUNNING and bool(lease) and found.lease_id == lease


def _suite_run(session: Session, found: Localization) -> SuiteRun | None:
    if found.suite_run_id is None:
        return None
    return session.get(SuiteRun, found.suite_run_id, with_for_update=True)


def _set_costs(found: Localization, costs: Costs) -> None:
    found.probe_count, found.repeats = costs.probe_count, costs.repeats
    found.builds, found.samples = costs.builds, costs.samples


def _seconds_left(until: datetime | None, now: datetime) -> float:
    return max((until - now).total_seconds(), 0.0) if until else 0.0
