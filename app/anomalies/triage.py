"""List and triage regressions, case failures, aggregate findings and alert groups."""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from sqlalchemy import ColumnElement, Select, and_, exists, or_, select
from sqlalchemy.orm import InstrumentedAttribute, Session, lazyload
from sqlalchemy.orm.interfaces import ORMOption
from sqlalchemy.orm.util import identity_key

from app.anomalies import deadlines, sensitivity
from app.anomalies.deadlines import Deadlines
from app.anomalies.models import (
    LINKED_STATUSES,
    STATUSES,
    AggregateFinding,
    AlertGroup,
    CaseFailure,
    MachineSilence,
    Regression,
    RunAnomaly,
    Triaged,
)
from app.anomalies.schemas import TriageUpdate
from app.anomalies.step_summary import StepSummary
from app.audit import service as audit
from app.benchmarks.models import Benchmark, CompilerConfig, Machine, Metric, Series
from app.core.db import utcnow
from app.core.errors import InvalidInput, NotFound
from app.core.names import DEFAULT_PROJECT
from app.core.pagination import count_and_page
from app.runs.models import Run


class RegressionNotFound(NotFound):
    """No regression with this id."""

    def __init__(self, regression_id: int) -> None:
        super().__init__(f"regression {regression_id} does not exist")


class FailureNotFound(NotFound):
    """No case failure with this id."""

    def __init__(self, failure_id: int) -> None:
        super().__init__(f"failure {failure_id} does not exist")


class AggregateFindingNotFound(NotFound):
    """No aggregate finding with this id."""

    def __init__(self, finding_id: int) -> None:
        super().__init__(f"aggregate finding {finding_id} does not exist")


# A finding of an alert group: what triage sets a status on.
Member = Regression | CaseFailure | MachineSilence | AggregateFinding


class AlertGroupNotFound(NotFound):
    """No alert group with this id."""

    def __init__(self, group_id: int) -> None:
        super().__init__(f"alert group {group_id} does not exist")


@dataclass(frozen=True)
class RegressionFilter:
    """Filters of the regression listing; None means any."""

    status: str | None = None
    machine: str | None = None
    channel: str | None = None
    suite: str | None = None
    config: str | None = None
    metric: str | None = None
    direction: str | None = None
    state: str | None = None
    since: datetime | None = None
    group_id: int | None = None
    first_bad_run_id: int | None = None
    found_by_run_id: int | None = None
    project: str | None = None


def _equal_where_given(
    query: Select[Any], conditions: Sequence[tuple[InstrumentedAttribute[Any], Any]]
) -> Select[Any]:
    """``query`` narrowed to ``column == wanted`` for each filter that is given (not None)."""
    for column, wanted in conditions:
        if wanted is not None:
            query = query.where(column == wanted)
    return query


def _filtered(query: Select[Any], where: RegressionFilter) -> Select[Any]:
    query = (
        query.join(Series, Regression.series_id == Series.id)
        .join(Benchmark, Series.benchmark_id == Benchmark.id)
        .join(Machine, Series.machine_id == Machine.id)
    )
    conditions = [
        (Regression.status, where.status),
        (Machine.name, where.machine),
        (Series.channel, where.channel),
        (Benchmark.suite, where.suite),
        (Regression.direction, where.direction),
        (Regression.state, where.state),
        (Regression.group_id, where.group_id),
        (Regression.first_bad_run_id, where.first_bad_run_id),
        (Regression.found_by_run_id, where.found_by_run_id),
        (Series.project, where.project),
    ]
    query = _equal_where_given(query, conditions)
    if where.config is not None:
        query = query.join(CompilerConfig).where(CompilerConfig.name == where.config)
    if where.metric is not None:
        query = query.join(Metric, Series.metric_id == Metric.id).where(Metric.name == where.metric)
    if where.since is not None:
        query = query.where(Regression.created_at >= where.since)
    return query


def _of_project(
    query: Select[Any], run_id: InstrumentedAttribute[int], project: str | None
) -> Select[Any]:
    """``query`` narrowed to the findings whose run (``run_id``) is of ``project`` (None: any).

    A finding is of its run's project: the runs of one project are judged against its own.
    """
    if project is None:
        return query
    return query.where(run_id.in_(select(Run.id).where(Run.project == project)))


def project_of(
    session: Session, finding: Regression | CaseFailure | AggregateFinding | AlertGroup
) -> str:
    """The project a finding (or an alert group) belongs to: its series', else its run's."""
    if isinstance(finding, Regression):
        return finding.series.project
    run_id = (
        finding.first_failing_run_id
        if isinstance(finding, CaseFailure)
        else finding.first_bad_run_id
    )
    if (known := session.identity_map.get(identity_key(Run, run_id))) is not None:
        return str(known.project)  # a run the session holds: no statement
    return session.scalar(select(Run.project).where(Run.id == run_id)) or DEFAULT_PROJECT


def regressions_query(where: RegressionFilter) -> Select[Any]:
    """The regressions matching ``where`` (unordered)."""
    return _filtered(select(Regression), where)


def list_regressions(
    session: Session, where: RegressionFilter, offset: int, limit: int
) -> tuple[list[Regression], int]:
    """A page of regressions, newest first, and how many match."""
    query = regressions_query(where)
    return count_and_page(session, query, [Regression.id.desc()], offset, limit)


@dataclass(frozen=True)
class FailureFilter:
    """Filters of the failure listing; None means any."""

    status: str | None = None
    machine: str | None = None
    channel: str | None = None
    suite: str | None = None
    group_id: int | None = None
    open: bool | None = None  # True: still failing; False: passing again
    flaky: bool | None = None
    failure: str | None = None  # failed | accuracy | removed | added
    severity: str | None = None  # high: failing cases; low: coverage changes
    project: str | None = None


def list_failures(
    session: Session, where: FailureFilter, offset: int, limit: int
) -> tuple[list[CaseFailure], int]:
    """A page of case failures, newest first, and how many match."""
    query = (
        select(CaseFailure)
        .join(Benchmark, CaseFailure.benchmark_id == Benchmark.id)
        .join(Machine, CaseFailure.machine_id == Machine.id)
    )
    conditions = [
        (CaseFailure.status, where.status),
        (Machine.name, where.machine),
        (CaseFailure.channel, where.channel),
        (Benchmark.suite, where.suite),
        (CaseFailure.group_id, where.group_id),
        (CaseFailure.flaky, where.flaky),
        (CaseFailure.failure, where.failure),
    ]
    query = _equal_where_given(query, conditions)
    query = _of_project(query, CaseFailure.first_failing_run_id, where.project)
    if where.open is not None:
        ended = CaseFailure.passing_again_run_id.is_not(None)
        query = query.where(~ended if where.open else ended)
    if where.severity is not None:  # CaseFailure.severity, in SQL
        coverage = CaseFailure.failure.in_(CaseFailure.COVERAGE)
        query = query.where(coverage if where.severity == "low" else ~coverage)
    return count_and_page(session, query, [CaseFailure.id.desc()], offset, limit)


@dataclass(frozen=True)
class AggregateFilter:
    """Filters of the aggregate finding listing; None means any."""

    status: str | None = None
    machine: str | None = None
    channel: str | None = None
    suite: str | None = None
    config: str | None = None
    stat: str | None = None
    rule: str | None = None
    group_id: int | None = None
    open: bool | None = None  # True: not recovered yet; False: recovered
    project: str | None = None


def list_aggregates(
    session: Session, where: AggregateFilter, offset: int, limit: int
) -> tuple[list[AggregateFinding], int]:
    """A page of aggregate findings, newest first, and how many match."""
    query = select(AggregateFinding).join(Machine, AggregateFinding.machine_id == Machine.id)
    conditions = [
        (AggregateFinding.status, where.status),
        (Machine.name, where.machine),
        (AggregateFinding.channel, where.channel),
        (AggregateFinding.suite, where.suite),
        (AggregateFinding.config, where.config),
        (AggregateFinding.stat, where.stat),
        (AggregateFinding.rule, where.rule),
        (AggregateFinding.group_id, where.group_id),
    ]
    query = _equal_where_given(query, conditions)
    query = _of_project(query, AggregateFinding.first_bad_run_id, where.project)
    if where.open is not None:
        ended = AggregateFinding.resolved_run_id.is_not(None)
        query = query.where(~ended if where.open else ended)
    return count_and_page(session, query, [AggregateFinding.id.desc()], offset, limit)


# --- Triage: one path for every kind, each kind a row of the table below ---

Row = TypeVar("Row", Regression, CaseFailure, AggregateFinding, AlertGroup)
_AUDITED = ("status", "assignee", "note", "bug_url", "related_group_id")


@dataclass(frozen=True)
class TriageKind(Generic[Row]):
    """A kind of finding people triage, and what triage does to one.

    ``name``: the kind in the audit log (``<name>.triage`` of ``<name>:<id>``); ``missing``:
    the 404 of an id it lacks; ``change``: what a triage sets on the row; ``audited``: what
    the audit log compares before and after. Every kind takes the same statuses
    (``STATUSES``, as ``TriageUpdate`` checks them).
    """

    name: str
    model: type[Row]
    missing: Callable[[int], NotFound]
    change: Callable[[Row, TriageUpdate, str], None]
    audited: Callable[[Row], dict[str, Any]]


def _apply(target: Triaged, update: TriageUpdate, by: str) -> None:
    for field in ("assignee", "note", "bug_url"):
        if (value := getattr(update, field)) is not None:
            setattr(target, field, value)
    target.triaged_by = by[:200]
    target.triaged_at = utcnow()


def _apply_with_status(target: Member, update: TriageUpdate, by: str) -> None:
    _apply(target, update, by)
    if update.status is not None:
        target.status = update.status
        target.related_group_id = (
            update.related_group_id if update.status in LINKED_STATUSES else None
        )


def _apply_to_group(group: AlertGroup, update: TriageUpdate, by: str) -> None:
    """A group has no status of its own (``group_status``): its members take the one given."""
    _apply(group, update, by)
    if update.status is not None:
        group.related_group_id = (
            update.related_group_id if update.status in LINKED_STATUSES else None
        )
    members: list[Member] = [
        *group.regressions,
        *group.failures,
        *group.silences,
        *group.aggregates,
    ]
    for member in members:
        _apply_with_status(member, update, by)


def _finding_fields(finding: Member) -> dict[str, Any]:
    return audit.fields(finding, _AUDITED)


def _group_fields(group: AlertGroup) -> dict[str, Any]:
    return {**audit.fields(group, _AUDITED[1:]), "status": group_status(group)}


REGRESSION = TriageKind(
    "regression", Regression, RegressionNotFound, _apply_with_status, _finding_fields
)
FAILURE = TriageKind("failure", CaseFailure, FailureNotFound, _apply_with_status, _finding_fields)
AGGREGATE = TriageKind(
    "aggregate", AggregateFinding, AggregateFindingNotFound, _apply_with_status, _finding_fields
)
GROUP = TriageKind("group", AlertGroup, AlertGroupNotFound, _apply_to_group, _group_fields)


def find(
    session: Session, kind: TriageKind[Row], row_id: int, options: Sequence[ORMOption] = ()
) -> Row:
    """One row of a kind by id; the kind's 404 without."""
    if (row := session.get(kind.model, row_id, options=options)) is None:
        raise kind.missing(row_id)
    return row


def triage(
    session: Session, kind: TriageKind[Row], row_id: int, update: TriageUpdate, by: str
) -> Row:
    """Change a row's status, assignee, note or bug link; ``by`` names who did it.

    The audit log keeps the fields it changed, before and after.
    """
    row = find(session, kind, row_id)
    _check_link(session, row, update)
    before = kind.audited(row)
    kind.change(row, update, by)
    target = f"{kind.name}:{row.id}"
    audit.record(session, by, f"{kind.name}.triage", target, before, kind.audited(row))
    session.flush()
    steps = [row] if isinstance(row, Regression) else getattr(row, "regressions", [])
    for series_id in sorted({step.series_id for step in steps}):  # each step is a label
        sensitivity.learn(session, series_id, by)
    return row


def _check_link(session: Session, row: Triaged, update: TriageUpdate) -> None:
    """A ``duplicate`` or ``downstream`` status names another, existing group; no other does.

    422 at ``body.related_group_id`` when it is missing, given with another status, or names the
    row's own group; 404 when the group does not exist.
    """
    linked = update.status in LINKED_STATUSES
    own = row.id if isinstance(row, AlertGroup) else getattr(row, "group_id", None)
    problem = None
    if linked and update.related_group_id is None:
        problem = f"a {update.status} finding names the group it is of: give related_group_id"
    elif not linked and update.related_group_id is not None:
        problem = f"related_group_id goes with the statuses {', '.join(LINKED_STATUSES)}"
    elif linked and update.related_group_id == own:
        problem = "a group is no duplicate or downstream of itself: name another group"
    if problem is not None:
        raise InvalidInput(
            problem,
            errors=[
                {"loc": "body.related_group_id", "field": "related_group_id", "message": problem}
            ],
        )
    if linked:
        assert update.related_group_id is not None
        find(session, GROUP, update.related_group_id)


def get_group(session: Session, group_id: int, with_steps: bool = True) -> AlertGroup:
    """One alert group by id; ``with_steps=False``: its steps are not read with it."""
    return find(session, GROUP, group_id, [] if with_steps else [lazyload(AlertGroup.regressions)])


def group_status(group: AlertGroup, steps: StepSummary | None = None) -> str:
    """The most pressing status among its findings ("new" with none).

    ``steps``: its steps' summary, if counted already (not read from ``group.regressions``).
    """
    members: list[Member] = [*group.failures, *group.silences, *group.aggregates]
    present = {member.status for member in members}
    present |= steps.statuses if steps is not None else {r.status for r in group.regressions}
    return next((s for s in STATUSES if s in present), "new")


@dataclass(frozen=True)
class Overdue:
    """When a finding must have been found to be overdue now (``deadlines.overdue_before``)."""

    triage: datetime  # still new and found at or before this
    bug: datetime  # acknowledged without a bug link and found at or before this

    @classmethod
    def now(cls, rules: Deadlines, now: datetime | None = None) -> "Overdue":
        """The cut-offs of ``rules`` at ``now`` (default: the present)."""
        moment = now or utcnow()
        return cls(
            deadlines.overdue_before(moment, rules.triage_days),
            deadlines.overdue_before(moment, rules.bug_days),
        )


def list_groups(
    session: Session,
    status: str | None,
    machine: str | None,
    channel: str | None,
    since: datetime | None,
    offset: int,
    limit: int,
    project: str | None = None,
    *,
    with_steps: bool = True,
    overdue: Overdue | None = None,
) -> tuple[list[AlertGroup], int]:
    """A page of alert groups, newest first (status is derived, so filtered here).

    Without ``with_steps`` their steps are not read with them: a group may have thousands,
    and ``step_summary`` counts them in SQL. ``overdue``: only those past a deadline.
    """
    query = groups_query(status, machine, channel, since, project, overdue)
    if not with_steps:
        query = query.options(lazyload(AlertGroup.regressions))
    return count_and_page(session, query, [], offset, limit)  # the query's own order


def page_of_groups(
    session: Session,
    status: str | None,
    machine: str | None,
    channel: str | None,
    limit: int,
    project: str | None = None,
    overdue: Overdue | None = None,
) -> list[AlertGroup]:
    """The newest ``limit`` alert groups matching, as ``list_groups`` gives, without the count.

    The inbox shows no total: counting every match would cost a second pass over them. Their
    steps are not read with them: a group may have thousands (``step_summary`` counts them).
    """
    query = groups_query(status, machine, channel, None, project, overdue)
    query = query.options(lazyload(AlertGroup.regressions))
    return list(session.scalars(query.limit(limit)))


def groups_query(
    status: str | None,
    machine: str | None,
    channel: str | None,
    since: datetime | None,
    project: str | None,
    overdue: Overdue | None = None,
) -> Select[Any]:
    """The alert groups matching, newest first (``overdue``: only those past a deadline)."""
    query = select(AlertGroup).join(Machine, AlertGroup.machine_id == Machine.id)
    query = _of_project(query, AlertGroup.first_bad_run_id, project)
    if machine is not None:
        query = query.where(Machine.name == machine)
    if channel is not None:
        query = query.where(AlertGroup.channel == channel)
    if since is not None:
        query = query.where(AlertGroup.created_at >= since)
    if status is not None:
        query = query.where(_status_is(status))
    if overdue is not None:
        untriaged = and_(_status_is("new"), AlertGroup.created_at <= overdue.triage)
        no_bug = and_(
            _status_is("acknowledged"),
            AlertGroup.bug_url == "",
            AlertGroup.created_at <= overdue.bug,
        )
        query = query.where(or_(untriaged, no_bug))
    return query.order_by(AlertGroup.id.desc())


def _status_is(status: str) -> ColumnElement[bool]:
    """``group_status(group) == status`` in SQL: the page alone is read, whatever the filter."""

    def member_in(statuses: Sequence[str] | None) -> ColumnElement[bool]:
        """A finding of the group (with one of these statuses, unless None)."""
        found = []
        for kind in (Regression, CaseFailure, MachineSilence, AggregateFinding):
            query = exists().where(kind.group_id == AlertGroup.id)
            found.append(query if statuses is None else query.where(kind.status.in_(statuses)))
        return or_(*found)

    more_pressing = STATUSES[: STATUSES.index(status)]
    if not more_pressing:  # "new": a new member, or no member at all
        return or_(member_in([status]), ~member_in(None))
    return and_(member_in([status]), ~member_in(more_pressing))


def list_run_anomalies(
    session: Session,
    machine: str | None,
    anomalous: bool | None,
    limit: int,
    project: str | None = None,
) -> list[RunAnomaly]:
    """Scored runs, newest first (of a project, if given)."""
    query = select(RunAnomaly).join(Run, RunAnomaly.run_id == Run.id)
    if project is not None:
        query = query.where(Run.project == project)
    if machine is not None:
        query = query.join(Machine, Run.machine_id == Machine.id).where(Machine.name == machine)
    if anomalous is not None:
        query = query.where(RunAnomaly.anomalous == anomalous)
    return list(session.scalars(query.order_by(Run.started_at.desc()).limit(limit)))
