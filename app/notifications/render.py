"""An alert group's notice as its payload (version 1, ``message``), rendered when it is sent.

Rendering reads the group as it is then: a notice planned when the group opened and sent
after the group wait tells of every finding the wait gathered.
"""

import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.anomalies import deadlines, shapes
from app.anomalies.deadlines import Deadlines
from app.anomalies.models import (
    AggregateFinding,
    AlertGroup,
    CaseFailure,
    MachineSilence,
    Regression,
)
from app.anomalies.triage import group_status
from app.benchmarks.models import Machine
from app.core.db import utcnow
from app.notifications.message import (
    CHART_FINDINGS,
    MAX_FINDINGS,
    PAYLOAD_VERSION,
    localized_headline,
    percent,
)
from app.notifications.models import Notice, Subscription
from app.notifications.service import Found
from app.runs.models import Result, Run

CHART_POINTS = 30  # of a charted finding's series, around its step
CHART_AFTER = 6  # of them from the first bad point on
EVENT_WORDS = {
    "opened": "",
    "grew": "More: ",
    "confirmed": "Confirmed: ",
    "reminder": "Still untriaged: ",
    "escalation": "Triage overdue: ",
    "resolved": "Resolved: ",
    "localized": "Localized: ",  # its headline is the localization's (``localized_headline``)
}
OVERDUE_WORDS = "Still untriaged, overdue: "  # a reminder past the group's triage deadline
AGGREGATE_UNITS = {"pass_rate": "%", "mean_compile_time_s": " s"}  # the others: "x"
# How a model's coverage finding's reason starts (``failures._coverage_findings``).
COVERAGE_VERBS = ("no longer reported", "newly reported")
RULE_WORDS = {
    "step": "a step",
    "pass_rate_below": "pass rate below 90%",
    "speedup_below_base": "speedup below 0.95x of the run before",
    "compression_below_base": "compression below 0.9x of the run before",
}


def iso(moment: datetime | None) -> str | None:
    """An aware time as ISO 8601 with ``Z``."""
    return moment.isoformat().replace("+00:00", "Z") if moment is not None else None


def notice_id(notice: Notice) -> str:
    """The notice's id on the wire (the ``webhook-id``): the same on every attempt."""
    return f"notice-{notice.id}"


def subscription_of(subscription: Subscription, revision: int) -> dict[str, Any]:
    """The payload's ``subscription``: who it is, and the revision that sent the notice."""
    return {
        "id": subscription.id,
        "name": subscription.name,
        "owner": subscription.owner,
        "revision": revision,
    }


class Renderer:
    """Renders notices against one public URL, caching what several notices share."""

    def __init__(
        self,
        session: Session,
        public_url: str,
        rules: Deadlines = deadlines.DEFAULT,
        now: datetime | None = None,
    ) -> None:
        self.session = session
        self.base = public_url.rstrip("/")
        self.rules = rules  # the triage deadlines a group is due by ...
        self.now = now  # ... judged at this time (None: when rendered)

    def group_url(self, group_id: int) -> str:
        """The group on the alerts page."""
        return f"{self.base}/alerts?group={group_id}"

    def notice(
        self,
        notice: Notice,
        subscription: Subscription,
        chosen: Sequence[Found],
        told: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The payload of a group's notice, telling of ``chosen`` (the selected findings).

        ``told``: a ``localized`` notice's localization (``localized.localization_of``); its
        page is then the notice's ``url``.
        """
        assert notice.group_id is not None
        group = self.session.get_one(AlertGroup, notice.group_id)
        section = self.group_section(group, chosen, notice.event, told)
        payload = {
            "version": PAYLOAD_VERSION,
            "id": notice_id(notice),
            "event": notice.event,
            "created_at": iso(notice.sent_at or notice.created_at),
            "headline": section.pop("headline"),
            "url": told["url"] if told is not None else section["url"],
            "subscription": subscription_of(subscription, notice.revision),
            "group": {
                k: v for k, v in section.items() if k not in ("findings", "omitted", "localization")
            },
            "findings": section["findings"],
            "findings_omitted": section["omitted"],
            "groups": [],
        }
        return payload | ({"localization": dict(told)} if told is not None else {})

    def digest(
        self,
        notice: Notice,
        subscription: Subscription,
        sections: Sequence[tuple[AlertGroup, Sequence[Found], str, Mapping[str, Any] | None]],
    ) -> dict[str, Any]:
        """The payload of a digest: one section per group (with the event that put it there).

        A section's fourth item is a ``localized`` notice's localization (else None).
        """
        groups = []
        for group, chosen, event, told in sections:
            section = self.group_section(group, chosen, event, told)
            section["findings_omitted"] = section.pop("omitted")
            section["event"] = event
            groups.append(section)
        findings = sum(len(g["findings"]) + g["findings_omitted"] for g in groups)
        headline = (
            f"Digest for {subscription.name!r}: {len(groups)} alert group(s), {findings} finding(s)"
        )
        return {
            "version": PAYLOAD_VERSION,
            "id": notice_id(notice),
            "event": "digest",
            "created_at": iso(notice.sent_at or notice.created_at),
            "headline": headline,
            "url": f"{self.base}/alerts",
            "subscription": subscription_of(subscription, notice.revision),
            "group": None,
            "findings": [],
            "findings_omitted": 0,
            "groups": groups,
        }

    def group_section(
        self,
        group: AlertGroup,
        chosen: Sequence[Found],
        event: str,
        told: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A group as a notice tells of it: where, when, its worst selected findings.

        A silence comes first, then failures (a case that no longer runs is worse than any
        step), then aggregates (each sums up a group of models), then the steps by the size of
        their change, then coverage changes (low severity: nothing is known to be broken).
        ``told``: a localization, whose headline the section takes and which it carries.
        """
        silent = [s for s in chosen if isinstance(s, MachineSilence)]
        cases = sorted((f for f in chosen if isinstance(f, CaseFailure)), key=lambda f: f.id)
        failing = [f for f in cases if f.severity != "low"]
        coverage = [f for f in cases if f.severity == "low"]
        summed = sorted(
            (a for a in chosen if isinstance(a, AggregateFinding)),
            key=lambda a: (-abs(a.rel_change), a.id),
        )
        steps = sorted(  # steps by their size, then shape changes by their spread's
            (r for r in chosen if isinstance(r, Regression)),
            key=lambda r: (r.is_shape, -abs(r.rel_change), r.id),
        )
        worst: list[Found] = [*silent, *failing, *summed, *steps, *coverage]
        listed = worst[:MAX_FINDINGS]
        charts = self._charts([r for r in listed if isinstance(r, Regression)][:CHART_FINDINGS])
        machine = self.session.get_one(Machine, group.machine_id)
        findings = [self.any_finding(f, charts) for f in listed]
        status = group_status(group)
        now = self.now or utcnow()
        late = deadlines.overdue(status, group.bug_url, group.created_at, now, self.rules)
        if told is not None:
            title = localized_headline(told, group.channel)
        else:
            words = OVERDUE_WORDS if late and event == "reminder" else EVENT_WORDS.get(event, "")
            title = words + headline(machine.name, group, silent, failing, steps, summed, coverage)
        section = {
            "headline": title,
            "id": group.id,
            "url": self.group_url(group.id),
            "machine": machine.name,
            "channel": group.channel,
            "status": status,
            "created_at": iso(group.created_at),
            "triage_due_at": iso(
                deadlines.add_working_days(group.created_at, self.rules.triage_days)
            ),
            "overdue": late,
            "findings_total": len(chosen),
            "last_good_run": self.run(group.last_good_run_id),
            "first_bad_run": self.run(group.first_bad_run_id),
            "environment_diff": group.environment_diff,
            "findings": findings,
            "omitted": len(worst) - len(listed),
        }
        return section | ({"localization": dict(told)} if told is not None else {})

    def run(self, run_id: int) -> dict[str, Any]:
        """A run as a notice names it."""
        run = self.session.get_one(Run, run_id)
        return {
            "id": run.id,
            "url": f"{self.base}/runs/{run.id}",
            "started_at": iso(run.started_at),
            "commit": run.commit,
        }

    def finding(
        self, regression: Regression, chart: tuple[list[float | None], int] | None
    ) -> dict[str, Any]:
        """One finding of the payload (with its series' recent values when charted)."""
        series = regression.series
        benchmark = series.benchmark
        found: dict[str, Any] = {
            "id": regression.id,
            "kind": regression.kind,
            "url": self.series_url(regression),
            "suite": benchmark.suite,
            "model": benchmark.model,
            "category": benchmark.category,
            "config": benchmark.config,
            "precision": benchmark.precision,
            "mode": benchmark.mode,
            "metric": series.metric.name,
            "unit": series.metric.unit,
            # as subscription rules see it: a shape change (kind noise, bimodal) got worse
            "direction": "regression" if regression.is_shape else regression.direction,
            "before": regression.before,
            "after": regression.after,
            "rel_change": regression.rel_change,
            "state": regression.state,
            "p_value": regression.p_value if math.isfinite(regression.p_value) else None,
            "status": regression.status,
            "reverted": regression.reverted,
            "hints": list(regression.hints),
        }
        if chart is not None:
            found["history"], found["first_bad_index"] = chart
        return found

    def any_finding(
        self, found: Found, charts: dict[int, tuple[list[float | None], int]]
    ) -> dict[str, Any]:
        """A finding of the payload, whatever its kind."""
        if isinstance(found, MachineSilence):
            return self.silence(found)
        if isinstance(found, CaseFailure):
            return self.failure(found)
        if isinstance(found, AggregateFinding):
            return self.aggregate(found)
        return self.finding(found, charts.get(found.id))

    def aggregate(self, finding: AggregateFinding) -> dict[str, Any]:
        """A dashboard aggregate of the payload: which, by what rule, and what explains it.

        ``metric`` names the aggregate, so that a receiver's line reads as a step's does.
        """
        return {
            "id": finding.id,
            "kind": "aggregate",
            "url": self.group_url(finding.group_id),
            "suite": finding.suite,
            "config": finding.config,
            "precision": finding.precision,
            "mode": finding.mode,
            "metric": finding.stat,
            "rule": finding.rule,
            "direction": "regression",
            "before": finding.before,
            "after": finding.after,
            "rel_change": finding.rel_change,
            "last_good_run": self.run(finding.last_good_run_id),
            "first_bad_run": self.run(finding.first_bad_run_id),
            "resolved_run_id": finding.resolved_run_id,
            "explained_by": finding.explained_by,
            "status": finding.status,
        }

    def silence(self, silence: MachineSilence) -> dict[str, Any]:
        """A machine that stopped reporting: since when, and how often it used to."""
        return {
            "id": silence.id,
            "kind": "machine_silent",
            "url": f"{self.base}/runs/{silence.last_run_id}",
            "machine": silence.machine.name,
            "channel": silence.channel,
            "last_run": self.run(silence.last_run_id),
            "silent_since": iso(silence.silent_since),
            "expected_every_s": silence.expected_every_s,
            "ended_by_run_id": silence.ended_by_run_id,
            "status": silence.status,
        }

    def failure(self, failure: CaseFailure) -> dict[str, Any]:
        """A failing case of the payload: what fails, why, since when.

        A coverage change (``failure`` ``removed`` or ``added``) is of kind ``coverage``; its
        runs are the one compared with and the one that changed (the fields keep a failing
        case's names, so that a receiver reads both alike).
        """
        benchmark = failure.benchmark
        return {
            "id": failure.id,
            "kind": "coverage" if failure.failure in CaseFailure.COVERAGE else "failure",
            "severity": failure.severity,
            "url": f"{self.base}/runs/{failure.first_failing_run_id}",
            "suite": benchmark.suite,
            "model": benchmark.model,
            "category": benchmark.category,
            "config": benchmark.config,
            "precision": benchmark.precision,
            "mode": benchmark.mode,
            "metric": failure.metric,
            "failure": failure.failure,
            "reason": failure.reason,
            "flaky": failure.flaky,
            "last_passing_run": self.run(failure.last_passing_run_id),
            "first_failing_run": self.run(failure.first_failing_run_id),
            "passing_again_run_id": failure.passing_again_run_id,
            "status": failure.status,
        }

    def series_url(self, regression: Regression) -> str:
        """The finding's series on the series page, by config."""
        series = regression.series
        benchmark = series.benchmark
        query = {
            "machine": series.machine.name,
            "channel": series.channel,
            "model": benchmark.model,
            "mode": benchmark.mode,
            "precision": benchmark.precision,
            "config": benchmark.config,
            "metric": series.metric.name,
            "by": "config",
        }
        return f"{self.base}/series?{urlencode(query)}"

    def _charts(
        self, regressions: Sequence[Regression]
    ) -> dict[int, tuple[list[float | None], int]]:
        """Per regression: its series' values around the step, and the step's index."""
        return {r.id: chart for r in regressions if (chart := self._chart(r)) is not None}

    def _chart(self, regression: Regression) -> tuple[list[float | None], int] | None:
        at = self.session.scalar(
            select(Result.measured_at).where(
                Result.series_id == regression.series_id,
                Result.run_id == regression.first_bad_run_id,
            )
        )
        if at is None:
            return None
        point = select(Result.status, Result.value).where(Result.series_id == regression.series_id)
        before = self.session.execute(
            point.where(Result.measured_at < at)
            .order_by(Result.measured_at.desc())
            .limit(CHART_POINTS - CHART_AFTER)
        ).all()
        after = self.session.execute(
            point.where(Result.measured_at >= at).order_by(Result.measured_at).limit(CHART_AFTER)
        ).all()
        values = [v if status == "ok" else None for status, v in [*reversed(before), *after]]
        return values, len(before)


def headline(
    machine: str,
    group: AlertGroup,
    silent: Sequence[MachineSilence],
    failing: Sequence[CaseFailure],
    steps: Sequence[Regression],
    summed: Sequence[AggregateFinding] = (),
    coverage: Sequence[CaseFailure] = (),
) -> str:
    """``2 failures, 3 regressions on h100-a (nightly): t5 fails (CUDA out of memory)``.

    A silence says since when; else the worst is the first failure, else the largest
    aggregate (``summed``), else the largest step, else the first coverage change
    (``1 coverage change on h100-a (nightly): vit newly reported``). ``failing`` holds
    failing cases alone: coverage changes are counted apart, so that a model added to the
    suite does not read as one that fails.
    """
    if silent:
        since = silent[0].silent_since
        return f"{machine} ({group.channel}) silent: no run since {since:%Y-%m-%d %H:%M} UTC"
    counts: dict[str, int] = {"failure": len(failing)} if failing else {}
    if summed:
        counts["aggregate"] = len(summed)
    if coverage:
        counts["coverage change"] = len(coverage)
    for regression in steps:
        kind = SHAPE_WORDS.get(regression.kind, regression.kind)
        counts[kind] = counts.get(kind, 0) + 1
    parts = [f"{n} {kind}{'s' if n != 1 else ''}" for kind, n in sorted(counts.items())]
    text = f"{', '.join(parts) or 'no findings'} on {machine} ({group.channel})"
    if failing:
        first = failing[0]
        text += f": {first.benchmark.model} fails ({first.reason[:80]})"
    elif summed:
        worst = summed[0]
        where = " ".join((worst.suite, worst.config, worst.precision, worst.mode))
        levels = f"{level(worst.stat, worst.before)} -> {level(worst.stat, worst.after)}"
        text += f": {where} {worst.stat} {levels} ({RULE_WORDS.get(worst.rule, worst.rule)})"
    elif steps:
        top = steps[0]
        model = top.series.benchmark.model
        if top.is_shape:
            words = shapes.in_words(top.direction, top.rel_change)
            text += f": {words} {top.series.metric.name} {model}"
        else:
            text += f": worst {percent(top.rel_change)} {top.series.metric.name} {model}"
        if top.state == "suspected":
            text += " (suspected)"
    elif coverage:
        text += f": {coverage_words(coverage[0])[:120]}"
    return text


SHAPE_WORDS = {"noise": "noise change", "bimodal": "bimodal change"}  # a headline's count


def coverage_words(change: CaseFailure) -> str:
    """A coverage change in words: ``t5 no longer reported``, ``vit newly reported``.

    A model's finding has a reason that starts with what happened (``no longer reported``,
    maybe with its count of cases), so the model is named first; a suite's finding (many
    models at once) has a reason that names its models, and is told as it is.
    """
    if change.reason.startswith(COVERAGE_VERBS):
        return f"{change.benchmark.model} {change.reason}"
    return change.reason


def level(stat: str, value: float) -> str:
    """An aggregate's value as the dashboard shows it: a pass rate in %, a speedup as 1.23x."""
    unit = AGGREGATE_UNITS.get(stat, "x")
    return f"{100 * value:.1f}%" if unit == "%" else f"{value:.3g}{unit}"
