"""Verdicts for a run's results against the default branch at its fork point.

A branch's run (``runs.branches``) is never detected: each of its results gets a verdict at
once instead (``judge``), against the default branch's series of the same benchmark, metric
and machine, as it stood at the fork point: the newest default-branch run of the run's
``base_commit`` (the merge base), else the newest one that started before it. A run of the
default branch itself is judged against the runs before it, the same way; always within
the run's project.
"""

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any
from urllib.parse import urlencode

from sqlalchemy import and_, select
from sqlalchemy.orm import Session

from app.anomalies import registry
from app.anomalies.detector_interface import DetectorThresholds
from app.anomalies.history import History, load_histories, load_samples
from app.anomalies.models import Regression
from app.benchmarks.models import Series
from app.core.bulk import member_of
from app.core.errors import DomainError
from app.core.names import DEFAULT_PROJECT
from app.runs.branches import base_channel, is_branch_channel
from app.runs.history import place_runs
from app.runs.models import Run
from app.runs.reads import get_run, list_run_results
from app.runs.shards import COMPLETED
from app.verdicts import cache
from app.verdicts.judge import LEVEL_POINTS, ResultVerdict, judge

MAX_RESULTS = 20_000  # a run's results judged in one answer (a read anyone may ask for)
HISTORY_POINTS = 60  # of the default branch's series, read up to the fork point
ORDER = {"regression": 0, "error": 1, "improvement": 2, "no_baseline": 3, "pass": 4}


class TooManyResults(DomainError):
    """A run too big to judge in one answer."""

    status_code = 413

    def __init__(self, run_id: int, count: int) -> None:
        super().__init__(
            f"run {run_id} has {count} results; verdicts are given for at most {MAX_RESULTS}"
        )


def verdicts_of(
    session: Session, run_id: int, thresholds: DetectorThresholds, public_url: str = ""
) -> dict[str, Any]:
    """Every result of the run with its verdict, the baseline used, and the counts.

    Computed a few at a time and kept a while (``cache``): anyone may ask.

    Raises:
        RunNotFound: no such run.
        TooManyResults: the run has more than ``MAX_RESULTS`` results.
        Busy: the server is computing as many verdicts as it will at once (refused before
            anything is read: call this before the session's first query).
    """
    with cache.turn():
        return _kept_or_judged(session, run_id, thresholds, public_url)


def _kept_or_judged(
    session: Session, run_id: int, thresholds: DetectorThresholds, public_url: str
) -> dict[str, Any]:
    run = get_run(session, run_id)
    if run.result_count > MAX_RESULTS:
        raise TooManyResults(run.id, run.result_count)
    # The database, and the run as it stands: ids are reused when a database starts again.
    key = (
        str(session.get_bind().engine.url),
        run.id,
        run.created_at,
        run.result_count,
        run.status,
        repr(sorted(thresholds.fields.items())),
        public_url,
    )
    return cache.kept_or_computed(key, lambda: _verdicts(session, run, thresholds, public_url))


def _verdicts(
    session: Session, run: Run, thresholds: DetectorThresholds, public_url: str
) -> dict[str, Any]:
    base_run, how = _fork_point(session, run)
    rows = list_run_results(session, run.id)
    mainline = _mainline_series(session, run, rows) if base_run is not None else {}
    histories = (
        load_histories(session, sorted(set(mainline.values())), base_run.started_at, HISTORY_POINTS)
        if base_run is not None and mainline
        else {}
    )
    accepted = _accepted_steps(session, histories)
    items = []
    for row in rows:
        series_id = mainline.get((row["benchmark_id"], row["metric_id"]))
        history = histories.get(series_id) if series_id is not None else None
        verdict = _verdict(session, row, series_id, history, accepted, thresholds)
        items.append(_item(row, verdict, series_id, run, public_url))
    items.sort(key=lambda i: (ORDER[i["verdict"]], -abs(i["rel_change"] or 0.0)))
    counts = dict.fromkeys(ORDER, 0)
    for item in items:
        counts[item["verdict"]] += 1
    return {
        "run_id": run.id,
        "branch": run.branch,
        "commit": run.commit,
        "channel": run.channel,
        "default_branch_channel": base_channel(run.channel),
        "is_branch": is_branch_channel(run.channel),
        "baseline": {
            "how": how,
            "commit": base_run.commit if base_run is not None else None,
            "run_ids": [base_run.id] if base_run is not None else [],
        },
        "counts": counts,
        "items": items,
        "url": f"{public_url.rstrip('/')}/runs/{run.id}/verdicts" if public_url else "",
    }


def _fork_point(session: Session, run: Run) -> tuple[Run | None, str]:
    """The default branch's run at the fork point, and how it was chosen."""
    query = place_runs(
        run.machine_id, base_channel(run.channel), run.project, newest_first=True, limit=1
    ).where(Run.status == COMPLETED, Run.id != run.id)
    if run.base_commit:
        found: Run | None = session.scalar(query.where(Run.commit == run.base_commit))
        if found is not None:
            return found, "merge-base"
    found = session.scalar(query.where(Run.started_at <= run.started_at))
    return (found, "nearest-earlier") if found is not None else (None, "none")


def _mainline_series(
    session: Session, run: Run, rows: Sequence[Mapping[str, Any]]
) -> dict[tuple[int, int], int]:
    """(benchmark, metric) -> the default branch's series of the run's machine."""
    found: dict[tuple[int, int], int] = {}
    benchmarks = sorted({row["benchmark_id"] for row in rows})
    for condition in member_of(session, Series.benchmark_id, benchmarks):
        query = select(Series.id, Series.benchmark_id, Series.metric_id).where(
            condition,
            and_(
                Series.machine_id == run.machine_id,
                Series.channel == base_channel(run.channel),
                Series.project == run.project,
            ),
        )
        for series_id, benchmark_id, metric_id in session.execute(query):
            found[benchmark_id, metric_id] = series_id
    return found


def _accepted_steps(session: Session, histories: Mapping[int, History]) -> dict[int, set[int]]:
    """Per series, the first bad runs of its accepted steps: where its current level starts."""
    steps: dict[int, set[int]] = {}
    for condition in member_of(session, Regression.series_id, sorted(histories)):
        query = select(Regression.series_id, Regression.first_bad_run_id).where(
            condition, Regression.state == "confirmed", Regression.status != "invalid"
        )
        for series_id, run_id in session.execute(query):
            steps.setdefault(series_id, set()).add(run_id)
    return steps


def _verdict(
    session: Session,
    row: Mapping[str, Any],
    series_id: int | None,
    history: History | None,
    accepted: Mapping[int, set[int]],
    thresholds: DetectorThresholds,
) -> ResultVerdict:
    if row["status"] != "ok" or row["value"] is None:
        why = row["reason"] or row["text_value"] or row["status"]
        return ResultVerdict("error", reason=f"the result {row['status']}: {why}")
    if series_id is None or history is None:
        return ResultVerdict("no_baseline", reason="the default branch has no such series here")
    start = max(
        (i for i, run_id in enumerate(history.run_ids) if run_id in accepted.get(series_id, ())),
        default=0,
    )
    values = history.values[start:]
    run_ids = history.run_ids[start:][-LEVEL_POINTS:]
    config = thresholds.for_series(registry.CHANGE_POINT, row["suite"], row["metric"], row["kind"])
    verdict = judge(row["value"], values, row["higher_is_better"], config)
    if verdict.verdict in ("regression", "improvement") and row["samples"]:
        # The samples can only hold a verdict back: read them where one is found.
        samples = load_samples(session, series_id, run_ids)
        pooled = [s for point in samples if point for s in point]
        verdict = judge(
            row["value"], values, row["higher_is_better"], config, row["samples"], pooled
        )
    return verdict


def _item(
    row: Mapping[str, Any], verdict: ResultVerdict, series_id: int | None, run: Run, public_url: str
) -> dict[str, Any]:
    fields = asdict(verdict)
    return {
        "suite": row["suite"],
        "model": row["model"],
        "config": row["config"],
        "precision": row["precision"],
        "mode": row["mode"],
        "batch_size": row["batch_size"],
        "params": row["params"] or {},
        "metric": row["metric"],
        "unit": row["unit"],
        "higher_is_better": row["higher_is_better"],
        "new": row["value"] if row["value"] is None or math.isfinite(row["value"]) else None,
        **fields,
        "series_id": row["series_id"],
        "default_branch_series_id": series_id,
        "series_url": _series_url(row, run, public_url) if series_id is not None else "",
    }


def _series_url(row: Mapping[str, Any], run: Run, public_url: str) -> str:
    if not public_url:
        return ""
    query = {
        "machine": run.machine.name,
        "channel": base_channel(run.channel),
        "model": row["model"],
        "mode": row["mode"],
        "precision": row["precision"],
        "config": row["config"],
        "metric": row["metric"],
        "branch": run.channel if is_branch_channel(run.channel) else "",
        "project": run.project if run.project != DEFAULT_PROJECT else "",
    }
    return f"{public_url.rstrip('/')}/series?{urlencode({k: v for k, v in query.items() if v})}"
