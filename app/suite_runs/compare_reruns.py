"""Cases a comparison could not decide, measured again: evidence read beside the run.

A compare case whose samples are too few, or too spread, to say better, worse or the same
"needs more runs". A person with the ``trigger`` scope asks for exactly those cases again:
a suite run of trigger ``compare`` on the run's machine whose shards are the cases, pinned to
the stack the run had (the worker measures only while its stack is still the run's, as a
confirmation re-run does). Its rows are never ingested: they stay in the shards, and the
compare folds their samples in beside the run's own (``folded``), so that no series, baseline
or detection sees them.

One unfinished re-run per run at a time: asking again while one is queued or running returns
it. At most ``MAX_CASES`` cases a request.
"""

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.benchmarks import vocabulary as vocab
from app.benchmarks.models import CASE_IDENTITY
from app.core.db import utcnow
from app.core.errors import InvalidInput
from app.core.queue import enqueue_after_commit
from app.jobs import REQUEUE_SHARDS
from app.runs.models import Run
from app.suite_runs.models import COMPARE_TRIGGER, SuiteRun
from app.suite_runs.pinned import measured_samples, plans, stack_of
from app.suite_runs.service import UNFINISHED, SuiteRunNotFound, open_suite_run

MAX_CASES = 20
KEY_PREFIX = "compare-"
ENVIRONMENT_CHANGED = "the machine's stack is no longer the run's; not measured again"

CaseMetric = tuple[str, str]  # a case's identity as JSON, and a metric


def case_id(case: Mapping[str, Any]) -> str:
    """A case's identity (``CASE_IDENTITY``) as one string, to match rows by."""
    return json.dumps({name: case.get(name) for name in CASE_IDENTITY}, sort_keys=True)


def request(session: Session, run: Run, cases: Sequence[dict[str, Any]], by: str) -> SuiteRun:
    """A re-run of ``cases`` (identities) of ``run`` on its machine, queued after the commit.

    The run must come from a benchwatch worker (no one else can measure it again); an
    unfinished re-run of the run is returned as it is.
    """
    if run.source != "worker" or run.tier not in vocab.SUITE_TIERS:
        raise InvalidInput(
            f"run {run.id} was not measured by a benchwatch worker (source {run.source!r}): "
            "no worker can measure its cases again; post more runs instead",
            errors=[{"loc": "body.run_id", "field": "run_id", "message": "not a worker's run"}],
        )
    unique = list({case_id(c): c for c in cases}.values())
    if not unique or len(unique) > MAX_CASES:
        raise InvalidInput(
            f"{len(unique)} cases: ask for 1 to {MAX_CASES} at once",
            errors=[{"loc": "body.cases", "field": "cases", "message": "1 to 20 cases"}],
        )
    earlier = list(
        session.scalars(
            select(SuiteRun).where(SuiteRun.key.like(f"{KEY_PREFIX}{run.id}-%")).with_for_update()
        )
    )
    if (running := next((s for s in earlier if s.status == "running"), None)) is not None:
        return running
    suite_run = open_suite_run(
        session,
        key=f"{KEY_PREFIX}{run.id}-{len(earlier) + 1}",
        machine=run.machine.name,
        tier=run.tier,
        trigger=COMPARE_TRIGGER,
        description={
            "compare": {
                "run_id": run.id,
                "channel": run.channel,
                "environment": stack_of(run),
                "requested_by": by[:200],
            }
        },
        shards=plans(unique),
    )
    enqueue_after_commit(session, REQUEUE_SHARDS, machine=suite_run.machine)
    return suite_run


def pinned_environment(suite_run: SuiteRun) -> dict[str, Any] | None:
    """The stack and channel a compare re-run must be measured on; None for other suite runs."""
    if suite_run.trigger != COMPARE_TRIGGER:
        return None
    asked = suite_run.description["compare"]
    return {**asked["environment"], "channel": asked["channel"]}


def skip(session: Session, suite_run_id: int, changes: Mapping[str, list[str]]) -> None:
    """Close a compare re-run unmeasured: the machine's stack is no longer the run's."""
    suite_run = _locked(session, suite_run_id)
    if suite_run.status != "running":
        return
    what = ", ".join(f"{name} {was or '-'} -> {now or '-'}" for name, (was, now) in changes.items())
    reason, now = f"{ENVIRONMENT_CHANGED} ({what})", utcnow()
    for shard in suite_run.shards:
        if shard.status in UNFINISHED:
            shard.status, shard.reason = "failed", reason
            shard.lease_until, shard.finished_at = None, now
    suite_run.status, suite_run.reason, suite_run.finished_at = "failed", reason, now


def finish(session: Session, suite_run_id: int) -> bool:
    """Close the re-run once every shard is over (nothing is ingested); whether it is over."""
    suite_run = _locked(session, suite_run_id)
    if suite_run.status != "running":
        return True
    if any(s.status in UNFINISHED for s in suite_run.shards):
        return False
    measured = any(s.rows for s in suite_run.shards)
    suite_run.status = "finished" if measured else "failed"
    if not measured:
        suite_run.reason = "; ".join(f"{s.label}: {s.reason}" for s in suite_run.shards)[:4000]
    suite_run.finished_at = utcnow()
    return True


def _locked(session: Session, suite_run_id: int) -> SuiteRun:
    suite_run = session.get(SuiteRun, suite_run_id, with_for_update=True, populate_existing=True)
    if suite_run is None:
        raise SuiteRunNotFound(suite_run_id)
    return suite_run


def of_run(session: Session, run_id: int) -> list[SuiteRun]:
    """The compare re-runs of a run, oldest first."""
    query = select(SuiteRun).where(SuiteRun.key.like(f"{KEY_PREFIX}{run_id}-%"))
    return list(session.scalars(query.order_by(SuiteRun.id)))


def folded(
    session: Session, run_id: int, units: Mapping[str, str]
) -> dict[CaseMetric, list[float]]:
    """The samples the run's compare re-runs measured, per case and metric (in ``units``).

    ``units``: each metric's stored unit. Every finished shard counts, whatever its re-run's
    state: a re-run that measured half its cases adds those.
    """
    found: dict[CaseMetric, list[float]] = {}
    for suite_run in of_run(session, run_id):
        for shard in suite_run.shards:
            for row in shard.rows or []:
                metric = row.get("metric", "")
                samples = measured_samples(row, units.get(metric, ""))
                if samples:
                    found.setdefault((case_id(row), metric), []).extend(samples)
    return found
