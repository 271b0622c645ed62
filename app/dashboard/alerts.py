"""The alerts page: the triage inbox of alert groups, their steps, failing cases and actions."""

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.anomalies import triage
from app.anomalies.models import STATUSES, AlertGroup, CaseFailure, Regression, RunAnomaly
from app.dashboard import figures
from app.dashboard.queries import machine_names
from app.runs.models import Run
from app.runs.service import series_points

GROUPS_PER_PAGE = 20
SHOWN_PER_GROUP = 25
CHARTS_PER_GROUP = 6
CHART_WINDOW = timedelta(days=20)  # either side of the step


@dataclass(frozen=True)
class AlertQuery:
    """The inbox's filters, from its URL."""

    status: str = "new"
    machine: str | None = None
    channel: str | None = None
    direction: str | None = None  # a kind of member: regression, improvement, failure
    group: int | None = None


def inbox(session: Session, query: AlertQuery) -> dict[str, Any]:
    """Groups matching the filters (or the one asked for), newest first."""
    if query.group is not None:
        groups = [triage.get_group(session, query.group)]
    else:
        status = query.status if query.status in STATUSES else None
        groups, _ = triage.list_groups(
            session, status, query.machine, query.channel, None, 0, GROUPS_PER_PAGE
        )
    described = [_group(session, g, charts=i == 0) for i, g in enumerate(groups)]
    if query.direction:
        described = [g for g in described if query.direction in g["summary"]["counts"]]
    return {
        "query": query,
        "groups": described,
        "statuses": STATUSES,
        "machines": machine_names(session),
    }


def _group(session: Session, group: AlertGroup, charts: bool) -> dict[str, Any]:
    members = sorted(group.regressions, key=lambda r: -abs(r.rel_change))
    # Still failing first, then by case.
    failures = sorted(
        group.failures,
        key=lambda f: (f.passing_again_run_id is not None, f.benchmark.model, f.id),
    )
    first_bad = session.get(Run, group.first_bad_run_id)
    anomaly = session.scalar(select(RunAnomaly).where(RunAnomaly.run_id == group.first_bad_run_id))
    return {
        "summary": triage.describe_group(session, group),
        "first_bad": first_bad,
        "last_good": session.get(Run, group.last_good_run_id),
        "anomaly": anomaly,
        "regressions": [_regression(r) for r in members[:SHOWN_PER_GROUP]],
        "more": max(len(members) - SHOWN_PER_GROUP, 0),
        "silences": group.silences,
        "failures": [_failure(f) for f in failures[:SHOWN_PER_GROUP]],
        "more_failures": max(len(failures) - SHOWN_PER_GROUP, 0),
        "charts": [_chart(session, r) for r in members[:CHARTS_PER_GROUP]] if charts else [],
    }


def _regression(regression: Regression) -> dict[str, Any]:
    benchmark, metric = regression.series.benchmark, regression.series.metric
    return {
        "id": regression.id,
        "model": benchmark.model,
        "suite": benchmark.suite,
        "config": benchmark.config,
        "precision": benchmark.precision,
        "mode": benchmark.mode,
        "metric": metric.name,
        "unit": metric.unit,
        "direction": regression.direction,
        "rel_change": regression.rel_change,
        "before": regression.before,
        "after": regression.after,
        "p_value": regression.p_value,
        "hints": regression.hints,
        "status": regression.status,
        "reverted": regression.reverted,
        "state": regression.state,
        "state_why": _state_why(regression.state, regression.confirmation),
        "rerun": _rerun(regression.confirmation),
        "series_link": _series_link(regression),
    }


def _state_why(state: str, confirmation: dict[str, Any]) -> str:
    """Why a step is suspected or withdrawn, in words (the tag's title)."""
    if state == "suspected":
        points = confirmation.get("suspected", {}).get("points", 0)
        return f"reported after {points} point(s), before the change-point test can judge it"
    return str(confirmation.get(state, {}).get("why", ""))


def _rerun(confirmation: dict[str, Any]) -> str:
    """What the confirmation re-run found ("" when there was none)."""
    rerun = confirmation.get("rerun")
    if not isinstance(rerun, dict):
        return ""
    return str(rerun.get("verdict") or rerun.get("status") or "")


def _failure(failure: CaseFailure) -> dict[str, Any]:
    benchmark = failure.benchmark
    return {
        "id": failure.id,
        "model": benchmark.model,
        "suite": benchmark.suite,
        "config": benchmark.config,
        "precision": benchmark.precision,
        "mode": benchmark.mode,
        "failure": failure.failure,
        "metric": failure.metric,
        "reason": failure.reason,
        "flaky": failure.flaky,
        "status": failure.status,
        "last_passing_run_id": failure.last_passing_run_id,
        "first_failing_run_id": failure.first_failing_run_id,
        "passing_again_run_id": failure.passing_again_run_id,
    }


def _series_link(regression: Regression) -> str:
    series = regression.series
    benchmark = series.benchmark
    return (
        f"/series?machine={series.machine.name}&channel={series.channel}"
        f"&model={benchmark.model}&mode={benchmark.mode}&precision={benchmark.precision}"
        f"&config={benchmark.config}&metric={series.metric.name}&by=config"
    )


def _chart(session: Session, regression: Regression) -> dict[str, Any]:
    """The series around the step, with the before and after levels."""
    at = session.get(Run, regression.first_bad_run_id)
    assert at is not None
    rows = series_points(
        session, regression.series_id, at.started_at - CHART_WINDOW, at.started_at + CHART_WINDOW
    )
    benchmark, metric = regression.series.benchmark, regression.series.metric
    title = f"{benchmark.model} · {benchmark.config} · {benchmark.precision}"
    figure = figures.step_chart(
        [(r.measured_at, r.value) for r in rows],
        at.started_at,
        (regression.before, regression.after),
        metric.name,
        title,
        metric.unit,
    )
    return {"id": f"step-{regression.id}", "figure": figure, "title": title}
