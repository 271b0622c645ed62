"""Asking for a localization, and reading them: what a finding's search is and found.

A localization is asked for one finding: a regression (its series' case is measured), a
case failure (its case), or an aggregate finding through the regression that explains most
of it (the largest step of its ``explained_by``). It measures one case, the finding's, on the
finding's machine: only a case a benchwatch worker can measure there, a built-in case of a
worker's run or a suite the operator maps to a command suite (``LOCALIZE_SUITES``).

A finding has one unfinished localization at a time (asking again answers it), and a
machine runs at most ``LOCALIZE_BUDGET`` in 24 hours, however they were started. A new one
comes with its suite run of trigger ``localize`` (queued, no shards, never ingested: it shows
the work on the machine's queue), and ``bench.localize`` is sent to the machine's worker after
the commit (``lifecycle`` is what the worker does with it).
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from app.anomalies.models import AggregateFinding, CaseFailure, Regression
from app.benchmarks import vocabulary as vocab
from app.benchmarks.models import Benchmark, Metric
from app.core.command_suites import command_tier
from app.core.db import utcnow
from app.core.errors import Conflict, NotFound
from app.core.pagination import count_and_page
from app.core.queue import enqueue_after_commit
from app.jobs import LOCALIZE
from app.localization.models import QUEUED, UNFINISHED, Localization
from app.runs.models import Environment, Run
from app.suite_runs.models import LOCALIZE_TRIGGER, SuiteRun
from app.tokens.models import ApiToken
from app.tokens.service import check_project

FindingKind = Literal["regression", "failure", "aggregate"]
# Beside the findings: one case slower under one compile config than under another on one
# run (``app.localization.configs``).
CONFIGS = "configs"
Kind = FindingKind | Literal["configs"]
BUDGET_WINDOW = timedelta(hours=24)
# The environment's recorded components, as a probe's spec names them.
COMPONENTS = ("torch", "torch_git_sha", "triton", "python", "cuda", "hip", "driver")
# Beside them, the run's compiler settings (name -> value), as its environment recorded them.
SETTINGS = "compiler_options"


class LocalizationNotFound(NotFound):
    """No localization of that id."""

    def __init__(self, localization_id: int) -> None:
        super().__init__(f"localization {localization_id} not found")


class FindingNotFound(NotFound):
    """The finding a localization was asked for does not exist."""

    def __init__(self, kind: str, finding_id: int) -> None:
        super().__init__(f"{kind} {finding_id} not found")


class NotMeasurable(Conflict):
    """No benchwatch worker can measure the finding's case."""


class BudgetSpent(Conflict):
    """The machine ran its localizations for the day."""


@dataclass(frozen=True)
class Target:
    """What a localization measures: the case, its machine and the runs it lies between."""

    regression: Regression | None
    failure: CaseFailure | None
    benchmark: Benchmark
    metric: Metric | None
    machine: str
    project: str
    group_id: int
    good_run: Run
    bad_run: Run


def components(environment: Environment) -> dict[str, Any]:
    """An environment as a probe's spec names it: recorded components and packages.

    Components not recorded (an empty string) are left out; a package named like a component
    is the component. The compiler settings, where the run recorded any, are ``SETTINGS``, a
    mapping (a package's version is a string).
    """
    found: dict[str, Any] = {
        name: str(environment.packages[name]) for name in sorted(environment.packages or {})
    }
    for name in COMPONENTS:
        if value := getattr(environment, name):
            found[name] = value
    if environment.compiler_options:
        found[SETTINGS] = dict(environment.compiler_options)
    return found


def environment_diff(good: Mapping[str, str], bad: Mapping[str, str]) -> dict[str, list[Any]]:
    """The components that differ, name -> [good, bad] (None where one side has none)."""
    return {
        name: [good.get(name), bad.get(name)]
        for name in sorted(set(good) | set(bad))
        if good.get(name) != bad.get(name)
    }


def measured_by(target: Target, command_suites: Mapping[str, str]) -> str | None:
    """The tier a worker measures the case with, or None when no worker can.

    A built-in case of a run a benchwatch worker made is measured in that run's tier; a case
    of a suite the operator maps (``LOCALIZE_SUITES``) by that command suite.
    """
    if (name := command_suites.get(target.benchmark.suite)) is not None:
        return command_tier(name)
    return builtin_tier(target.bad_run)


def builtin_tier(run: Run) -> str | None:
    """The built-in tier a benchwatch worker's run was made in; None for another run."""
    return run.tier if run.source == "worker" and run.tier in vocab.SUITE_TIERS else None


def target_of(session: Session, kind: FindingKind, finding_id: int) -> Target:
    """The case, machine and runs of a finding (404 when it does not exist)."""
    if kind == "aggregate":
        aggregate = session.get(AggregateFinding, finding_id)
        if aggregate is None:
            raise FindingNotFound("aggregate finding", finding_id)
        regression = _explaining(session, aggregate)
        if regression is None:
            raise NotMeasurable(
                f"aggregate finding {finding_id} is explained by no regression: "
                "a localization measures one regressed case"
            )
        return _of_regression(session, regression)
    if kind == "failure":
        failure = session.get(CaseFailure, finding_id)
        if failure is None or failure.failure in CaseFailure.COVERAGE:
            raise FindingNotFound("failure", finding_id)
        good, bad = _runs(session, failure.last_passing_run_id, failure.first_failing_run_id)
        return Target(
            None,
            failure,
            failure.benchmark,
            None,
            failure.machine.name,
            bad.project,
            failure.group_id,
            good,
            bad,
        )
    regression = session.get(Regression, finding_id)
    if regression is None:
        raise FindingNotFound("regression", finding_id)
    return _of_regression(session, regression)


def _of_regression(session: Session, regression: Regression) -> Target:
    good, bad = _runs(session, regression.last_good_run_id, regression.first_bad_run_id)
    series = regression.series
    return Target(
        regression,
        None,
        series.benchmark,
        series.metric,
        series.machine.name,
        series.project,
        regression.group_id,
        good,
        bad,
    )


def _runs(session: Session, good_id: int, bad_id: int) -> tuple[Run, Run]:
    good, bad = session.get(Run, good_id), session.get(Run, bad_id)
    # A finding's runs are never deleted under it (its regression goes with them).
    assert good is not None, good_id
    assert bad is not None, bad_id
    return good, bad


def _explaining(session: Session, aggregate: AggregateFinding) -> Regression | None:
    """The aggregate's explaining regression of the largest step (lowest id on a tie)."""
    ids = (aggregate.explained_by or {}).get("regressions", [])
    found = list(session.scalars(select(Regression).where(Regression.id.in_(ids)))) if ids else []
    return min(found, key=lambda r: (-abs(r.rel_change), r.id), default=None)


def request_localization(
    session: Session,
    kind: FindingKind,
    finding_id: int,
    *,
    started_by: str,
    budget: int,
    command_suites: Mapping[str, str],
    token: ApiToken | None = None,
) -> tuple[Localization, bool]:
    """The finding's unfinished localization, or a new one queued; and whether it is new.

    Refused (409) when no worker can measure the case or the machine spent its budget; a
    project-limited token may ask for its project's findings only (403).
    """
    target = target_of(session, kind, finding_id)
    if token is not None:
        check_project(token, target.project, "body")
    unfinished = session.scalar(
        select(Localization)
        .where(_of_finding(kind, finding_id), Localization.state.in_(UNFINISHED))
        .order_by(Localization.id)
        .limit(1)
    )
    if unfinished is not None:
        return unfinished, False
    case = measured_case(target, command_suites)
    check_budget(session, target.machine, budget)
    good = components(target.good_run.environment)
    bad = components(target.bad_run.environment)
    localization = Localization(
        finding_kind=kind,
        finding_id=finding_id,
        regression_id=target.regression.id if target.regression else None,
        case_failure_id=target.failure.id if target.failure else None,
        aggregate_finding_id=finding_id if kind == "aggregate" else None,
        group_id=target.group_id,
        machine=target.machine,
        project=target.project,
        good_run_id=target.good_run.id,
        bad_run_id=target.bad_run.id,
        case=case,
        good_environment=good,
        bad_environment=bad,
        started_by=started_by,
        answer={"environment_diff": environment_diff(good, bad)},
    )
    return queue_localization(session, localization, target.bad_run), True


def queue_localization(session: Session, localization: Localization, run: Run) -> Localization:
    """A new localization stored with its suite run, and sent to its machine after the commit.

    ``run``: the run it measures the finding of (its first bad one), whose commit and channel
    its suite run shows.
    """
    session.add(localization)
    session.flush()
    localization.suite_run_id = _suite_run(session, localization, run).id
    enqueue_after_commit(
        session, LOCALIZE, localization_id=localization.id, machine=localization.machine
    )
    return localization


def _suite_run(session: Session, localization: Localization, run: Run) -> SuiteRun:
    """The localization's suite run: queued on its machine until the worker starts it."""
    suite_run = SuiteRun(
        key=f"localize-{localization.id}",
        machine=localization.machine,
        tier=localization.case["tier"],
        trigger=LOCALIZE_TRIGGER,
        status=QUEUED,
        description={
            "commit": run.commit or "",
            "environment": {"channel": run.channel},
            "extra": {
                "localization": {
                    "id": localization.id,
                    "finding": {"kind": localization.finding_kind, "id": localization.finding_id},
                }
            },
        },
    )
    suite_run.shards = []
    session.add(suite_run)
    session.flush()
    return suite_run


def _of_finding(kind: FindingKind, finding_id: int) -> Any:
    return (Localization.finding_kind == kind) & (Localization.finding_id == finding_id)


def measured_case(target: Target, command_suites: Mapping[str, str]) -> dict[str, Any]:
    """The case a localization of ``target`` measures, its tier the worker's that measures it.

    What a new localization stores, and what ``benchwatch repro`` measures by hand.

    Raises:
        NotMeasurable: no benchwatch worker measures the case (``measured_by``).
    """
    tier = measured_by(target, command_suites)
    if tier is None:
        raise NotMeasurable(
            f"no benchwatch worker measures {target.benchmark.suite}/{target.benchmark.model} "
            f"on {target.machine}: its runs come from {target.bad_run.source or 'uploads'}, "
            "and LOCALIZE_SUITES maps no command suite to its suite"
        )
    return _case(target, tier)


def _case(target: Target, tier: str) -> dict[str, Any]:
    benchmark, metric = target.benchmark, target.metric
    case: dict[str, Any] = {
        **benchmark.identity(),
        "params": benchmark.params or {},
        "tier": tier,
        "channel": target.bad_run.channel,
    }
    if metric is not None:
        case |= {
            "metric": metric.name,
            "unit": metric.unit,
            "higher_is_better": metric.higher_is_better,
        }
    if target.regression is not None:
        step = target.regression
        case |= {"before": step.before, "after": step.after, "rel_change": step.rel_change}
    if target.failure is not None:
        case |= {"metric": target.failure.metric, "failure": target.failure.reason}
    return case


def check_budget(session: Session, machine: str, budget: int) -> None:
    """Refused (409) when the machine ran ``budget`` localizations in the last 24 hours."""
    since = utcnow() - BUDGET_WINDOW
    spent = list(
        session.scalars(
            select(Localization.requested_at)
            .where(Localization.machine == machine, Localization.requested_at > since)
            .order_by(Localization.requested_at)
        )
    )
    if len(spent) >= budget:
        again = (spent[len(spent) - budget] + BUDGET_WINDOW).isoformat(timespec="minutes")
        raise BudgetSpent(
            f"machine {machine} has run {len(spent)} localizations in 24 h "
            f"(LOCALIZE_BUDGET {budget}); the next may start at {again}"
        )


def get_localization(session: Session, localization_id: int) -> Localization:
    """A localization with its probes (404 when there is none)."""
    found = session.scalar(
        select(Localization)
        .where(Localization.id == localization_id)
        .options(selectinload(Localization.probes))
    )
    if found is None:
        raise LocalizationNotFound(localization_id)
    return found


def list_localizations(
    session: Session,
    *,
    kind: Kind | None,
    finding_id: int | None,
    group_id: int | None,
    states: Sequence[str],
    offset: int,
    limit: int,
) -> tuple[list[Localization], int]:
    """A page of localizations, newest first, without their probes."""
    query = select(Localization)
    if kind is not None:
        query = query.where(Localization.finding_kind == kind)
    if finding_id is not None:
        query = query.where(Localization.finding_id == finding_id)
    if group_id is not None:
        query = query.where(Localization.group_id == group_id)
    if states:
        query = query.where(Localization.state.in_(states))
    newest = (Localization.requested_at.desc(), Localization.id.desc())
    return count_and_page(session, query, newest, offset, limit)


def of_suite_runs(session: Session, suite_run_ids: Sequence[int]) -> dict[int, Localization]:
    """The localization each of these suite runs (trigger ``localize``) carries out, by id."""
    if not suite_run_ids:
        return {}
    found = session.scalars(
        select(Localization).where(Localization.suite_run_id.in_(suite_run_ids))
    )
    return {
        localization.suite_run_id: localization
        for localization in found
        if localization.suite_run_id
    }
