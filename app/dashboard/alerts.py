"""The alerts page: the triage inbox of alert groups: steps, failing cases, coverage, aggregates."""

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.annotations import service as annotations_service
from app.anomalies import deadlines, described, sensitivity, shapes, step_summary, triage
from app.anomalies.deadlines import Deadlines
from app.anomalies.models import (
    STATUSES,
    AggregateFinding,
    AlertGroup,
    CaseFailure,
    Regression,
    RunAnomaly,
)
from app.dashboard import figures, kernels_page, localization_page
from app.dashboard import format as fmt
from app.dashboard.queries import machine_names
from app.notifications import issue_sync
from app.runs.models import Run
from app.runs.reads import series_levels

GROUPS_PER_PAGE = 20
SHOWN_PER_GROUP = 25
CHARTS_PER_GROUP = 6
CHART_WINDOW = timedelta(days=20)  # either side of the step
ANNOTATIONS_SHOWN = 10  # per group: those in its window, the newest
ANNOTATION_AFTER = timedelta(days=1)  # a group's window ends this long after its first bad run
EXPLAINING_SHOWN = 8  # links to the per-model findings behind an aggregate finding
RULE_WORDS = {
    "step": "step (change-point detector)",
    "pass_rate_below": "pass rate below 90%",
    "speedup_below_base": "speedup below 0.95x of the run before",
    "compression_below_base": "compression below 0.9x of the run before",
}
# The per-model findings an aggregate finding names (``explained_by``), by their key there.
KINDS: dict[str, type[Regression] | type[CaseFailure]] = {
    "regressions": Regression,
    "failures": CaseFailure,
}
STAT_UNITS = {  # how an aggregate's value is shown (a pass rate is stored as a fraction)
    "pass_rate": "%",
    "geomean_speedup": "x",
    "mean_compile_time_s": "s",
    "mean_compression_ratio": "x",
}


@dataclass(frozen=True)
class AlertQuery:
    """The inbox's filters, from its URL."""

    status: str = "new"
    machine: str | None = None
    channel: str | None = None
    direction: str | None = None  # a kind of member: regression, failure, coverage, ...
    group: int | None = None
    project: str | None = None  # that project's groups only (None: every project's)
    overdue: bool = False  # only groups past a triage deadline (any status)


def inbox(
    session: Session, query: AlertQuery, rules: Deadlines = deadlines.DEFAULT
) -> dict[str, Any]:
    """Groups matching the filters (or the one asked for), newest first.

    ``rules``: the triage deadlines (each group says when it is due and whether it is late).
    """
    if query.group is not None:
        groups = [triage.get_group(session, query.group, with_steps=False)]
    else:
        status = query.status if query.status in STATUSES and not query.overdue else None
        overdue = triage.Overdue.now(rules) if query.overdue else None
        groups = triage.page_of_groups(
            session,
            status,
            query.machine,
            query.channel,
            GROUPS_PER_PAGE,
            query.project,
            overdue,
        )
    # The runs and run scores every group names, read at once (not one group at a time).
    run_ids = {i for g in groups for i in (g.first_bad_run_id, g.last_good_run_id)}
    runs = {r.id: r for r in session.scalars(select(Run).where(Run.id.in_(run_ids)))}
    scores = select(RunAnomaly).where(RunAnomaly.run_id.in_({g.first_bad_run_id for g in groups}))
    anomalies = {a.run_id: a for a in session.scalars(scores)}
    # Steps are counted in SQL and only those shown are loaded: a group may have thousands.
    ids = [g.id for g in groups]
    steps = step_summary.summarize(session, ids)
    shown = step_summary.largest_steps(session, ids, SHOWN_PER_GROUP)
    described = [
        _group(
            session, g, runs, anomalies.get(g.first_bad_run_id), (steps[g.id], shown[g.id]), rules
        )
        | {"charts": _charts(session, shown[g.id], runs) if i == 0 else []}
        for i, g in enumerate(groups)
    ]
    profiled = kernels_page.profiled_steps(session, [r for g in groups for r in shown[g.id]])
    for group in described:
        for row in group["regressions"]:
            row["kernels"] = row["id"] in profiled
    if query.direction:
        described = [g for g in described if query.direction in g["summary"]["counts"]]
    _with_localizations(session, described)
    _with_triage_records(session, described)
    issues = issue_sync.states_of(session, [g["summary"]["bug_url"] for g in described])
    for group in described:
        group["issue"] = issues.get(group["summary"]["bug_url"])
    return {
        "query": query,
        "groups": described,
        "statuses": STATUSES,
        "machines": machine_names(session, query.project),
    }


def _with_triage_records(session: Session, groups: list[dict[str, Any]]) -> None:
    """Each step shown with its series' triage record in words (one statement a chunk)."""
    shown = [row for g in groups for row in g["regressions"]]
    found = sensitivity.records(session, [row["series_id"] for row in shown])
    for row in shown:
        record = found.get(row["series_id"])
        row["triage_record"] = record.words() if record is not None else ""


def _with_localizations(session: Session, groups: list[dict[str, Any]]) -> None:
    """Each finding shown, and its group, with its newest localization (one statement).

    A row's ``localization`` is None where it has none; a group's ``localizations`` are its
    shown findings' that have one, as (the finding in words, the localization in brief).
    """
    kinds = {"regression": "regressions", "failure": "failures", "aggregate": "aggregates"}
    rows = {kind: [row for g in groups for row in g[key]] for kind, key in kinds.items()}
    newest = localization_page.newest_of(
        session, {kind: [row["id"] for row in shown] for kind, shown in rows.items()}
    )
    for group in groups:
        group["localizations"] = []
        for kind, key in kinds.items():
            for row in group[key]:
                row["localization"] = found = newest.get((kind, row["id"]))
                if found is not None:
                    words = "aggregate finding" if kind == "aggregate" else kind
                    group["localizations"].append((f"{words} {row['id']}", found))


def _group(
    session: Session,
    group: AlertGroup,
    runs: dict[int, Run],
    anomaly: RunAnomaly | None,
    steps: tuple[step_summary.StepSummary, list[Regression]],
    rules: Deadlines,
) -> dict[str, Any]:
    """A group as the page shows it, without charts.

    ``runs`` holds its first bad and last good runs; ``steps``: its steps' summary and those
    shown.
    """
    counted, members = steps
    # Still failing (or still missing) first, then by case.
    cases = sorted(
        group.failures,
        key=lambda f: (f.passing_again_run_id is not None, f.benchmark.model, f.id),
    )
    failures = [f for f in cases if f.severity != "low"]
    coverage = [f for f in cases if f.severity == "low"]  # a table of their own: none fails
    first_bad = runs.get(group.first_bad_run_id)
    summary = described.describe_group(session, group, counted, rules)
    last_good = runs.get(group.last_good_run_id)
    return {
        "summary": summary,
        "first_bad": first_bad,
        "last_good": last_good,
        "annotations": _annotations(
            session, summary["machine"], group.channel, summary["project"], last_good, first_bad
        ),
        "anomaly": anomaly,
        "regressions": [_regression(r) for r in members],
        "more": max(counted.total - SHOWN_PER_GROUP, 0),
        "silences": group.silences,
        "failures": [_failure(f) for f in failures[:SHOWN_PER_GROUP]],
        "more_failures": max(len(failures) - SHOWN_PER_GROUP, 0),
        "coverage": [_coverage(f) for f in coverage[:SHOWN_PER_GROUP]],
        "more_coverage": max(len(coverage) - SHOWN_PER_GROUP, 0),
        "aggregates": _aggregates(session, group.aggregates),
    }


def _annotations(
    session: Session,
    machine: str,
    channel: str,
    project: str,
    last_good: Run | None,
    first_bad: Run | None,
) -> list[dict[str, Any]]:
    """The annotations in a group's window, global or of its machine (and channel).

    Those of every project and of the group's alone. The window runs from the group's last
    good run to a day after its first bad run.
    """
    if last_good is None or first_bad is None:
        return []
    found = annotations_service.annotations_for(
        session,
        machine,
        [channel],
        [project],
        last_good.started_at,
        first_bad.started_at + ANNOTATION_AFTER,
        ANNOTATIONS_SHOWN,
    )
    return [
        {
            "id": a.id,
            "at": a.at,
            "ends_at": a.ends_at,
            "text": a.text,
            "url": a.url,
            "scope": annotations_service.scope_of(a),
        }
        for a in found
    ]


def _regression(regression: Regression) -> dict[str, Any]:
    benchmark, metric = regression.series.benchmark, regression.series.metric
    return {
        "id": regression.id,
        **benchmark.identity(),
        "metric": metric.name,
        "unit": metric.unit,
        "direction": regression.direction,
        "rel_change": regression.rel_change,
        # a shape change's words (its spread's ratio): its rel_change is no level's
        "shape": shapes.in_words(regression.direction, regression.rel_change)
        if regression.is_shape
        else "",
        "before": regression.before,
        "after": regression.after,
        "before_spread": regression.before_spread,
        "after_spread": regression.after_spread,
        "p_value": regression.p_value,
        "hints": regression.hints,
        "status": regression.status,
        "reverted": regression.reverted,
        "state": regression.state,
        "state_why": _state_why(regression.state, regression.confirmation),
        "rerun": _rerun(regression.confirmation),
        "series_link": _series_link(regression),
        "series_id": regression.series_id,
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
        **benchmark.identity(),
        "failure": failure.failure,
        "metric": failure.metric,
        "reason": failure.reason,
        "flaky": failure.flaky,
        "status": failure.status,
        "last_passing_run_id": failure.last_passing_run_id,
        "first_failing_run_id": failure.first_failing_run_id,
        "passing_again_run_id": failure.passing_again_run_id,
    }


def _coverage(change: CaseFailure) -> dict[str, Any]:
    """A coverage change with its runs in words (``runs``: text and the run it links to)."""
    shown = _failure(change)
    if change.failure == "removed":
        runs = [
            ("last reported in", change.last_passing_run_id),
            ("missing since", change.first_failing_run_id),
        ]
    else:
        runs = [("new in", change.first_failing_run_id)]
    return shown | {"severity": change.severity, "runs": runs}


def _aggregates(session: Session, findings: list[AggregateFinding]) -> list[dict[str, Any]]:
    """The group's aggregate findings, not recovered first, each with links to its causes."""
    ids = {kind: {i for f in findings for i in f.explained_by.get(kind, [])} for kind in KINDS}
    group_of = {
        kind: {
            row.id: row.group_id
            for row in session.execute(select(model.id, model.group_id).where(model.id.in_(wanted)))
        }
        for kind, model in KINDS.items()
        if (wanted := ids[kind])
    }
    shown = []
    for finding in sorted(findings, key=lambda f: (f.resolved_run_id is not None, f.id)):
        unit = STAT_UNITS[finding.stat]
        scale = 100 if unit == "%" else 1
        links = [
            {
                "text": f"{kind[:-1]} {i}",
                "href": f"/alerts?group={group_of[kind][i]}#{kind[:-1]}-{i}",
            }
            for kind in KINDS
            for i in finding.explained_by.get(kind, [])
            if i in group_of.get(kind, {})
        ]
        shown.append(
            {
                "id": finding.id,
                "group": " · ".join(
                    (finding.suite, finding.config, finding.precision, finding.mode)
                ),
                "stat": finding.stat,
                "rule": RULE_WORDS.get(finding.rule, finding.rule),
                "before": fmt.number(finding.before * scale, unit),
                "after": fmt.number(finding.after * scale, unit),
                "rel_change": finding.rel_change,
                "last_good_run_id": finding.last_good_run_id,
                "first_bad_run_id": finding.first_bad_run_id,
                "resolved_run_id": finding.resolved_run_id,
                "explained_by": links[:EXPLAINING_SHOWN],
                # Localized through the regression that explains most of it: it needs one.
                "localizable": bool(finding.explained_by.get("regressions")),
                "more_explaining": max(len(links) - EXPLAINING_SHOWN, 0),
                "status": finding.status,
            }
        )
    return shown


def _series_link(regression: Regression) -> str:
    series = regression.series
    benchmark = series.benchmark
    return (
        f"/series?machine={series.machine.name}&channel={series.channel}"
        f"&model={benchmark.model}&mode={benchmark.mode}&precision={benchmark.precision}"
        f"&config={benchmark.config}&metric={series.metric.name}&by=config"
    )


def _charts(session: Session, members: list[Regression], runs: dict[int, Run]) -> list[Any]:
    """Charts of a group's largest steps."""
    return [_chart(session, r, runs) for r in members[:CHARTS_PER_GROUP]]


def _chart(session: Session, regression: Regression, runs: dict[int, Run]) -> dict[str, Any]:
    """The series around the step, with the before and after levels (or distributions)."""
    at = runs.get(regression.first_bad_run_id) or session.get(Run, regression.first_bad_run_id)
    assert at is not None
    # The levels alone: a chart draws no samples, which may be thousands a point.
    rows = series_levels(
        session,
        regression.series_id,
        at.started_at - CHART_WINDOW,
        at.started_at + CHART_WINDOW,
        None,
    )
    benchmark, metric = regression.series.benchmark, regression.series.metric
    title = f"{benchmark.model} · {benchmark.config} · {benchmark.precision}"
    points = [(r.measured_at, r.value) for r in rows]
    if regression.is_shape:
        figure = figures.shape_chart(
            points, at.started_at, regression.direction, metric.name, title, metric.unit
        )
    else:
        levels = (regression.before, regression.after)
        figure = figures.step_chart(points, at.started_at, levels, metric.name, title, metric.unit)
    return {"id": f"step-{regression.id}", "figure": figure, "title": title}
