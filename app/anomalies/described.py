"""Findings and alert groups as the read models show them: their fields, spelled out.

What the API answers and the pages show of a finding: its machine and benchmark by name, a
group's counts and spans, and where a deadline applies, whether it is overdue
(``deadlines``).
"""

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from app.anomalies import deadlines, step_summary
from app.anomalies.deadlines import Deadlines
from app.anomalies.models import AggregateFinding, AlertGroup, CaseFailure
from app.anomalies.step_summary import StepSummary
from app.anomalies.triage import group_status, project_of
from app.benchmarks.models import Benchmark, Machine
from app.core.db import utcnow


def describe_failure(failure: CaseFailure) -> dict[str, Any]:
    """A failure's fields with its machine and benchmark spelled out, for the read model."""
    benchmark = failure.benchmark
    return {
        "id": failure.id,
        "group_id": failure.group_id,
        "machine": failure.machine.name,
        "channel": failure.channel,
        **benchmark.identity(),
        "failure": failure.failure,
        "severity": failure.severity,
        "metric": failure.metric,
        "reason": failure.reason,
        "flaky": failure.flaky,
        "last_passing_run_id": failure.last_passing_run_id,
        "first_failing_run_id": failure.first_failing_run_id,
        "passing_again_run_id": failure.passing_again_run_id,
        "status": failure.status,
        "assignee": failure.assignee,
        "note": failure.note,
        "bug_url": failure.bug_url,
        "related_group_id": failure.related_group_id,
        "triaged_by": failure.triaged_by,
        "triaged_at": failure.triaged_at,
        "created_at": failure.created_at,
        "updated_at": failure.updated_at,
    }


def describe_aggregate(finding: AggregateFinding) -> dict[str, Any]:
    """An aggregate finding's fields with its machine's name, for the read model."""
    fields = (
        "id", "group_id", "channel", "suite", "config", "precision", "mode", "stat", "rule",
        "before", "after", "rel_change", "last_good_run_id", "first_bad_run_id",
        "resolved_run_id", "explained_by", "status", "assignee", "note", "bug_url",
        "related_group_id", "triaged_by", "triaged_at", "created_at", "updated_at",
    )  # fmt: skip
    return {"machine": finding.machine.name, **{f: getattr(finding, f) for f in fields}}


def describe_group(
    session: Session,
    group: AlertGroup,
    steps: StepSummary | None = None,
    rules: Deadlines = deadlines.DEFAULT,
    now: datetime | None = None,
) -> dict[str, Any]:
    """A group's fields with what it spans, for the read model.

    ``counts``: its steps per direction, then ``failure`` (failing cases), ``coverage``
    (cases no longer or newly reported, counted apart: nothing is known to fail),
    ``machine_silent`` and ``aggregate``; a kind it has none of is left out. ``steps``: its
    steps' summary, if counted already (else ``group.regressions`` are read).
    """
    steps = steps if steps is not None else step_summary.summary_of(group.regressions)
    failures = group.failures
    counts = dict(steps.counts)
    for failure in failures:
        kind = "coverage" if failure.severity == "low" else "failure"
        counts[kind] = counts.get(kind, 0) + 1
    if group.silences:
        counts["machine_silent"] = len(group.silences)
    if group.aggregates:
        counts["aggregate"] = len(group.aggregates)
    # Each has a suite, config and precision.
    spans: list[Benchmark | AggregateFinding] = [
        *(f.benchmark for f in failures),
        *group.aggregates,
    ]
    machine = session.get(Machine, group.machine_id)
    status = group_status(group, steps)
    return {
        "id": group.id,
        "machine": machine.name if machine else "",
        "channel": group.channel,
        "project": project_of(session, group),
        "first_bad_run_id": group.first_bad_run_id,
        "last_good_run_id": group.last_good_run_id,
        "status": status,
        "triage_due_at": deadlines.add_working_days(group.created_at, rules.triage_days),
        "bug_due_at": deadlines.add_working_days(group.created_at, rules.bug_days),
        "overdue": deadlines.overdue(
            status, group.bug_url, group.created_at, now or utcnow(), rules
        ),
        "counts": counts,
        "suites": sorted(steps.suites | {b.suite for b in spans}),
        "configs": sorted(steps.configs | {b.config for b in spans}),
        "precisions": sorted(steps.precisions | {b.precision for b in spans}),
        "metrics": sorted(
            steps.metrics
            | {f.metric for f in failures if f.metric}  # a coverage change names none
            | {a.stat for a in group.aggregates}
        ),
        "environment_diff": group.environment_diff,
        "assignee": group.assignee,
        "note": group.note,
        "bug_url": group.bug_url,
        "related_group_id": group.related_group_id,
        "triaged_by": group.triaged_by,
        "triaged_at": group.triaged_at,
        "created_at": group.created_at,
    }


def describe_groups(
    session: Session, groups: Sequence[AlertGroup], rules: Deadlines = deadlines.DEFAULT
) -> list[dict[str, Any]]:
    """``describe_group`` of each, their steps counted in SQL at once (not read one by one).

    A page of 500 groups may hold millions of steps: a listing reads their counts alone.
    """
    steps = step_summary.summarize(session, [g.id for g in groups])
    return [describe_group(session, g, steps[g.id], rules) for g in groups]
