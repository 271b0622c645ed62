"""Confirmation re-runs: a suspected step on a benchwatch worker's series is measured again.

A step reported as ``suspected`` rests on one or two points. Where those points came from a
benchwatch worker, the cases can be measured again on the same machine, in the same
environment, and the new samples pooled with the suspect point's, as chromeperf's pinpoint
and PyTorch's retry bot do: a real step shows again, a transient (a noisy neighbour, a
thermal dip) does not.

The request is a suite run of trigger ``confirm`` (one per suspect run at a time, extended
while it is unfinished) whose shards are the suspected cases; its ``description`` names the
run to pool into, the regressions and the environment the suspect run had. Being shards, the
cases are leased, retried and swept again like a scheduled run's: a worker that is down finds
them when it starts, and the request shows as a running suite run with pending shards
meanwhile. The worker measures them only if its environment is still the suspect run's; when
they are in, ``finish_rerun`` appends the samples to the suspect point's result (its value,
the history as measured, is left alone) and judges each regression with ``judge``.
"""

import json
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.anomalies.detectors import DetectorConfig, noise_scale, relative_noise
from app.anomalies.history import load_histories, load_samples
from app.anomalies.locks import hold_machine_channel
from app.anomalies.models import Regression
from app.benchmarks import vocabulary as vocab
from app.benchmarks.models import CASE_IDENTITY
from app.core.db import utcnow
from app.core.queue import enqueue_after_commit
from app.core.sample_stats import rank_p_value
from app.jobs import REQUEUE_SHARDS
from app.runs.models import Result, Run
from app.suite_runs.models import RERUN_TRIGGER, SuiteRun, SuiteShard
from app.suite_runs.pinned import measured_samples, plans, stack_of
from app.suite_runs.service import UNFINISHED, SuiteRunNotFound, open_suite_run

MAX_CASES = 8  # cases per re-run: the largest suspected steps first
ENVIRONMENT_CHANGED = "environment changed since the suspect run; not re-run"
MIN_POINTS_BEFORE = 3
DEFAULTS = DetectorConfig()


@dataclass(frozen=True)
class Confirmation:
    """What a re-run says of a suspected step.

    ``state``: ``confirmed``, ``withdrawn`` or ``suspected`` (undecided). Shifts are
    Hodges-Lehmann estimates relative to the median of the level before: ``rel_shift`` of
    the pooled suspect point, ``rerun_rel_shift`` of the re-run's samples alone.
    """

    state: str
    p_value: float
    shift: float
    rel_shift: float
    rerun_rel_shift: float
    reason: str


def judge(
    before: Sequence[float],
    original: Sequence[float],
    rerun: Sequence[float],
    suspected_change: float,
    config: DetectorConfig = DEFAULTS,
) -> Confirmation:
    """Judge a suspect point, its samples pooled with a re-run's, against the level before.

    Confirmed: the pooled samples differ from the level before by a Mann-Whitney U test
    (``p <= config.max_p_value``), the Hodges-Lehmann shift is at least the minimum effect
    of that level (``config.min_effect`` of its samples' noise), on the suspected side, and
    the re-run on its own
    is at least half way there. Withdrawn: the re-run alone is back at the old level (under
    half the suspected change, or on the other side). Otherwise it stays suspected.

    The re-run is judged on its own for withdrawal because pooling halves a transient
    without removing it: half the pooled samples still sit at the suspect level, which puts
    the pooled shift about half way and, with many samples, the pooled test below any p.

    Args:
        before: the samples of the points before the suspect one (its level).
        original: the suspect point's own samples.
        rerun: the re-run's samples of the same case and metric.
        suspected_change: the suspected step, relative to the level before (signed).
        config: the thresholds of the detector that suspected it.
    """
    level, pooled = np.asarray(before, dtype=np.float64), np.asarray([*original, *rerun], float)
    again = np.asarray(rerun, dtype=np.float64)
    base = float(np.median(level))
    if base == 0 or not len(again) or not suspected_change:
        return Confirmation(
            "suspected", 1.0, 0.0, 0.0, 0.0, "the level before is 0: no relative shift"
        )
    shift = _hodges_lehmann(pooled, level)
    rel, rerun_rel = shift / abs(base), _hodges_lehmann(again, level) / abs(base)
    p_value, side = rank_p_value(level, pooled), math.copysign(1.0, suspected_change)
    facts = f"pooled {rel:+.1%}, p = {p_value:.2g}; re-run alone {rerun_rel:+.1%}"
    if rerun_rel * side < abs(suspected_change) / 2:
        reason = f"the re-run is back at the old level ({facts})"
        return Confirmation("withdrawn", p_value, shift, rel, rerun_rel, reason)
    least = config.min_effect(relative_noise(level, noise_scale(level)))
    if p_value <= config.max_p_value and rel * side >= least:
        return Confirmation(
            "confirmed", p_value, shift, rel, rerun_rel, f"the step holds ({facts})"
        )
    reason = f"not decided ({facts}); still suspected"
    return Confirmation("suspected", p_value, shift, rel, rerun_rel, reason)


def _hodges_lehmann(after: np.ndarray[Any, Any], before: np.ndarray[Any, Any]) -> float:
    return float(np.median(np.subtract.outer(after, before)))


def request_reruns(session: Session, suspected: Sequence[Regression]) -> None:
    """Queue a re-run of the suspected cases of each suspect run a benchwatch worker made.

    Called by detection in its transaction, with the suspected regressions it just recorded.
    A regression is requested once (its ``confirmation`` holds ``rerun`` from then on), so a
    retried detection adds nothing; one of a run from elsewhere (an upload, CI) is skipped,
    as is one beyond ``MAX_CASES`` cases of a run (recorded as not re-run). The machine's
    worker is told after the commit.
    """
    by_run: dict[int, list[Regression]] = defaultdict(list)
    for regression in suspected:
        if regression.state == "suspected" and "rerun" not in (regression.confirmation or {}):
            by_run[regression.first_bad_run_id].append(regression)
    for run_id, regressions in sorted(by_run.items()):
        run = session.get(Run, run_id)
        if run is not None and run.source == "worker" and run.tier in vocab.SUITE_TIERS:
            _request(session, run, regressions)


def _request(session: Session, run: Run, regressions: list[Regression]) -> None:
    existing = list(
        session.scalars(
            select(SuiteRun)
            .where(SuiteRun.key.like(f"confirm-{run.id}-%"))
            .order_by(SuiteRun.id)
            .with_for_update()
            .execution_options(populate_existing=True)
        )
    )
    requested = {i for s in existing for i in _request_of(s)["regression_ids"]}
    fresh = [r for r in regressions if r.id not in requested]
    if not fresh:
        return
    target = next((s for s in existing if s.status == "running"), None)
    cases = [case for shard in target.shards for case in shard.cases] if target else []
    chosen, over, new_cases = _fit(fresh, cases)
    now = utcnow().isoformat()
    if chosen:
        target = _extend(session, run, target, len(existing), chosen, new_cases)
        enqueue_after_commit(session, REQUEUE_SHARDS, machine=target.machine)
        for regression in chosen:
            _record(regression, status="requested", requested_at=now, suite_run_id=target.id)
    for regression in over:
        verdict = f"not re-run: run {run.id} has more than {MAX_CASES} suspected cases"
        _record(regression, status="not_run", requested_at=now, suite_run_id=None, verdict=verdict)


def _fit(
    regressions: list[Regression], cases: list[dict[str, Any]]
) -> tuple[list[Regression], list[Regression], list[dict[str, Any]]]:
    """Which regressions fit in the request beside ``cases``, the largest steps first.

    Returns the regressions that fit, those that do not, and the cases the first add.
    """
    chosen: list[Regression] = []
    over: list[Regression] = []
    added: list[dict[str, Any]] = []
    for regression in sorted(regressions, key=lambda r: (-abs(r.rel_change), r.id)):
        case = regression.series.benchmark.identity()
        if case not in cases and len(cases) + len(added) >= MAX_CASES:
            over.append(regression)
            continue
        if case not in cases and case not in added:
            added.append(case)
        chosen.append(regression)
    return chosen, over, added


def _extend(
    session: Session,
    run: Run,
    target: SuiteRun | None,
    earlier: int,
    regressions: list[Regression],
    cases: list[dict[str, Any]],
) -> SuiteRun:
    """The unfinished request of the run with these cases added, or a new one with them."""
    ids = [r.id for r in regressions]
    if target is None:
        environment = stack_of(run)
        request = {"run_id": run.id, "channel": run.channel, "environment": environment}
        return open_suite_run(
            session,
            key=f"confirm-{run.id}-{earlier + 1}",
            machine=run.machine.name,
            tier=run.tier,
            trigger=RERUN_TRIGGER,
            description={"confirm": {**request, "regression_ids": ids}},
            shards=plans(cases),
        )
    # A new shard per new case: a shard a worker may be measuring keeps the cases it has.
    for plan in plans(cases):
        for case in plan.cases:
            position = len(target.shards)
            target.shards.append(SuiteShard(position=position, label=plan.label, cases=[case]))
    known = _request_of(target)
    merged = {**known, "regression_ids": [*known["regression_ids"], *ids]}
    target.description = {**target.description, "confirm": merged}
    session.flush()
    return target


def _request_of(suite_run: SuiteRun) -> dict[str, Any]:
    request: dict[str, Any] = suite_run.description["confirm"]
    return request


def suspect_environment(suite_run: SuiteRun) -> dict[str, Any] | None:
    """The stack and channel of the run a re-run pools into; None for any other suite run."""
    if suite_run.trigger != RERUN_TRIGGER:
        return None
    request = _request_of(suite_run)
    return {**request["environment"], "channel": request["channel"]}


def _record(regression: Regression, **rerun: Any) -> None:
    """Merge into ``confirmation["rerun"]`` (a new dict: SQLAlchemy sees a replaced value)."""
    confirmation = dict(regression.confirmation or {})
    confirmation["rerun"] = {**confirmation.get("rerun", {}), **rerun}
    regression.confirmation = confirmation


def skip_rerun(session: Session, suite_run_id: int, changes: Mapping[str, list[str]]) -> None:
    """Close a re-run unmeasured: the machine's stack is no longer the suspect run's."""
    suite_run = _locked(session, suite_run_id)
    if suite_run.status != "running":
        return
    what = ", ".join(f"{name} {was or '-'} -> {now or '-'}" for name, (was, now) in changes.items())
    now = utcnow()
    for shard in suite_run.shards:
        if shard.status in UNFINISHED:
            shard.status, shard.reason = "failed", f"{ENVIRONMENT_CHANGED} ({what})"
            shard.lease_until, shard.finished_at = None, now
    suite_run.status, suite_run.reason = "failed", f"{ENVIRONMENT_CHANGED} ({what})"
    suite_run.finished_at = now
    for regression in _regressions(session, suite_run):
        _record(
            regression,
            status="not_run",
            verdict=ENVIRONMENT_CHANGED,
            environment_changes=dict(changes),
            finished_at=now.isoformat(),
        )


def finish_rerun(session: Session, suite_run_id: int) -> list[Regression] | None:
    """Pool and judge once every shard of the re-run is over; None while some are to run.

    Each regression's case and metric, measured again, has its samples appended to the suspect
    point's result and is judged (``judge``); a case that failed again leaves the regression
    as it was, with the reason. A regression detection confirmed or withdrew meanwhile keeps
    its state; the re-run's verdict is recorded beside it.
    """
    suite_run = _locked(session, suite_run_id)
    if suite_run.status != "running" or any(s.status in UNFINISHED for s in suite_run.shards):
        return None
    rows, failed = _measured(suite_run)
    regressions = _regressions(session, suite_run)
    outcomes = [
        _conclude(session, suite_run, regression, rows, failed) for regression in regressions
    ]
    suite_run.finished_at = utcnow()
    if any(outcomes) or not regressions:
        suite_run.status = "finished"
    else:
        suite_run.status, suite_run.reason = "failed", "no case was measured again"
    return regressions


def _locked(session: Session, suite_run_id: int) -> SuiteRun:
    """The re-run, once detection of its machine and channel is not running (Postgres).

    Detection rewrites a regression's ``state`` and ``confirmation`` from what it read when
    it started; taking turns with it keeps either side from overwriting the other's verdict.
    """
    found = session.get(SuiteRun, suite_run_id)
    if found is None:
        raise SuiteRunNotFound(suite_run_id)
    if (run := session.get(Run, _request_of(found)["run_id"])) is not None:
        hold_machine_channel(session, run)
    suite_run = session.get(SuiteRun, suite_run_id, with_for_update=True, populate_existing=True)
    if suite_run is None:
        raise SuiteRunNotFound(suite_run_id)
    return suite_run


def _regressions(session: Session, suite_run: SuiteRun) -> list[Regression]:
    ids = _request_of(suite_run)["regression_ids"]
    query = select(Regression).where(Regression.id.in_(ids)).order_by(Regression.id)
    locked = query.with_for_update(of=Regression).execution_options(populate_existing=True)
    return list(session.scalars(locked))


CaseKey = str
Rows = dict[tuple[CaseKey, str], dict[str, Any]]


def _key(case: Mapping[str, Any]) -> CaseKey:
    return json.dumps({name: case.get(name) for name in CASE_IDENTITY}, sort_keys=True)


def _measured(suite_run: SuiteRun) -> tuple[Rows, dict[CaseKey, str]]:
    """The re-run's rows by case and metric, and why each case of a failed shard failed."""
    rows: Rows = {}
    failed: dict[CaseKey, str] = {}
    for shard in suite_run.shards:
        for row in shard.rows or []:
            rows[_key(row), row["metric"]] = row
        if shard.status == "failed":
            failed |= {_key(case): shard.reason for case in shard.cases}
    return rows, failed


def _conclude(
    session: Session,
    suite_run: SuiteRun,
    regression: Regression,
    rows: Rows,
    failed: dict[CaseKey, str],
) -> bool:
    """Pool and judge one regression; False when its case was not measured again."""
    series, now = regression.series, utcnow().isoformat()
    case = _key(series.benchmark.identity())
    row = rows.get((case, series.metric.name))
    added = measured_samples(row, series.metric.unit) if row is not None else []
    result = session.get(Result, (regression.first_bad_run_id, series.id))
    if not added or result is None:
        why = (row or {}).get("reason") or failed.get(case)
        why = why or f"the re-run did not measure {series.metric.name}"
        if result is None:
            why = "the suspect run has no result of this series to pool into"
        _record(regression, status="failed", verdict=f"re-run failed: {why}", finished_at=now)
        return False
    original = _pool(result, suite_run.id, added)
    before = _level_before(session, regression)
    if len(before) < MIN_POINTS_BEFORE:
        verdict = Confirmation(
            "suspected", 1.0, 0.0, 0.0, 0.0, "too few points before the suspect run"
        )
    else:
        samples = [s for point in before for s in point]
        verdict = judge(samples, original, added, regression.rel_change, _config(regression))
    if regression.state == "suspected":
        regression.state = verdict.state
    _record(
        regression,
        status="done",
        verdict=f"re-run on {suite_run.machine}: {verdict.state}; {verdict.reason}",
        state=verdict.state,
        samples_before=sum(len(point) for point in before),
        samples_original=len(original),
        samples_added=len(added),
        p_value=verdict.p_value,
        shift=verdict.shift,
        rel_shift=verdict.rel_shift,
        rerun_rel_shift=verdict.rerun_rel_shift,
        finished_at=now,
    )
    return True


def _pool(result: Result, suite_run_id: int, added: list[float]) -> list[float]:
    """Append the re-run's samples to the suspect point's (once); its original samples."""
    pooled = (result.extra or {}).get("rerun", {})
    if pooled.get("suite_run_id") == suite_run_id:  # a finish repeated: already in
        return list((result.samples or [])[: pooled["samples_original"]])
    original = list(result.samples or ([] if result.value is None else [result.value]))
    result.samples = [*original, *added]
    marker = {"suite_run_id": suite_run_id, "samples_original": len(original)}
    result.extra = {**(result.extra or {}), "rerun": {**marker, "samples_added": len(added)}}
    return original


def _level_before(session: Session, regression: Regression) -> list[list[float]]:
    """The samples of each point of the level before the suspect run (the detector's window).

    The level starts after the series' previous step, if one falls in the window.
    """
    first_bad = session.get_one(Run, regression.first_bad_run_id)
    window = int(regression.detector.get("window", DEFAULTS.window))
    histories = load_histories(session, [regression.series_id], first_bad.started_at, window + 1)
    history = histories.get(regression.series_id)
    if history is None or first_bad.id not in history.run_ids:
        return []
    end = history.run_ids.index(first_bad.id)
    steps = session.scalars(
        select(Regression.first_bad_run_id).where(
            Regression.series_id == regression.series_id,
            Regression.id != regression.id,
            Regression.state != "withdrawn",
        )
    )
    starts = [history.run_ids.index(r) for r in steps if r in history.run_ids[:end]]
    start = max(starts, default=0)
    points = [
        (run_id, value)
        for run_id, value in zip(history.run_ids[start:end], history.values[start:end], strict=True)
        if math.isfinite(value)
    ]
    samples = load_samples(session, regression.series_id, [run_id for run_id, _ in points])
    return [list(s) if s else [value] for s, (_, value) in zip(samples, points, strict=True)]


def _config(regression: Regression) -> DetectorConfig:
    """The thresholds the suspecting detector used, where it recorded them."""
    recorded = regression.detector
    return DetectorConfig(
        max_p_value=float(recorded.get("max_p_value", DEFAULTS.max_p_value)),
        min_rel_change=float(recorded.get("min_rel_change", DEFAULTS.min_rel_change)),
        noise_multiple=float(recorded.get("noise_multiple", DEFAULTS.noise_multiple)),
        min_rel_floor=float(recorded.get("min_rel_floor", DEFAULTS.min_rel_floor)),
    )
