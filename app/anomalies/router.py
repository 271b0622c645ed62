"""Regressions, case failures, aggregate findings, alert groups and anomalous runs."""

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request

from app.anomalies import (
    backtest,
    described,
    manual,
    registry,
    revisions,
    sensitivity,
    triage,
)
from app.anomalies import bulk_triage as bulk_triage_service
from app.anomalies.deadlines import Deadlines
from app.anomalies.models import AggregateFinding, AlertGroup, CaseFailure, Regression, RunAnomaly
from app.anomalies.schemas import (
    AggregateFindingRead,
    AggregateRule,
    AggregateStat,
    AlertGroupDetail,
    AlertGroupRead,
    BacktestReport,
    BacktestRequest,
    BulkTriage,
    BulkTriaged,
    CaseFailureRead,
    FailureKind,
    LabelShare,
    MachineSilenceRead,
    ManualFinding,
    RegressionRead,
    RevisionRead,
    RunAnomalyRead,
    SensitivityRead,
    SensitivityUpdate,
    Severity,
    Status,
    StepPosition,
    StepState,
    TriageUpdate,
)
from app.api.deps import ProjectQuery, ReadAccess, SessionDep, TriageActor
from app.api.responses import READS, WRITES, errors
from app.api.validation import ApiRoute
from app.benchmarks.models import Series
from app.benchmarks.service import SeriesFilter, SeriesNotFound
from app.core import queue
from app.core.bounds import QueryTime, RowId
from app.core.errors import InvalidInput, NotFound
from app.core.pagination import Page, PageParams
from app.notifications.replay import replay
from app.notifications.service import get_subscription
from app.tokens import service as tokens_service
from app.tokens.auth import Actor

reads = APIRouter(
    tags=["anomalies"], dependencies=[ReadAccess], route_class=ApiRoute, responses=READS
)
writes = APIRouter(tags=["anomalies"], route_class=ApiRoute, responses={**WRITES, **errors(404)})
Paging = Annotated[PageParams, Depends()]


def _own(
    session: SessionDep,
    actor: Actor,
    finding: Regression | CaseFailure | AggregateFinding | AlertGroup,
    loc: str,
) -> None:
    """403 when the actor's token is limited to another project than the finding's."""
    tokens_service.check_project(actor.token, triage.project_of(session, finding), loc)


def _triage(
    session: SessionDep,
    actor: Actor,
    kind: triage.TriageKind[triage.Row],
    row_id: int,
    update: TriageUpdate,
    loc: str,
) -> triage.Row:
    """Triage one row of a kind, committed: a 403 first for a token of another project."""
    _own(session, actor, triage.find(session, kind, row_id), loc)
    row = triage.triage(session, kind, row_id, update, actor.label)
    queue.commit(session)
    return row


def regression_filter(
    status: Status | None = None,
    machine: str | None = None,
    channel: str | None = None,
    suite: str | None = None,
    config: str | None = None,
    metric: str | None = None,
    direction: str | None = None,
    state: StepState | None = None,
    since: QueryTime | None = None,
    group_id: RowId | None = None,
    first_bad_run_id: RowId | None = None,
    found_by_run_id: RowId | None = None,
    project: ProjectQuery = None,
) -> triage.RegressionFilter:
    """The listing's filters from the query, each id bounded to what its column holds."""
    return triage.RegressionFilter(
        status,
        machine,
        channel,
        suite,
        config,
        metric,
        direction,
        state,
        since,
        group_id,
        first_bad_run_id,
        found_by_run_id,
        project,
    )


Filter = Annotated[triage.RegressionFilter, Depends(regression_filter)]


@reads.get("/regressions", response_model=Page[RegressionRead])
def list_regressions(session: SessionDep, where: Filter, paging: Paging) -> Page[RegressionRead]:
    """Regressions and improvements, newest first; filter by status, machine, suite, ..."""
    items, total = triage.list_regressions(session, where, paging.offset, paging.limit)
    return paging.of([RegressionRead.model_validate(r) for r in items], total)


@reads.get("/regressions/{regression_id}", response_model=RegressionRead, responses=errors(404))
def get_regression(regression_id: RowId, session: SessionDep) -> Regression:
    """One regression."""
    return triage.find(session, triage.REGRESSION, regression_id)


@writes.patch("/regressions/{regression_id}", response_model=RegressionRead)
def update_regression(
    regression_id: RowId, update: TriageUpdate, session: SessionDep, actor: TriageActor
) -> Regression:
    """Triage a regression: status, assignee, note, bug link (scope `triage`)."""
    return _triage(session, actor, triage.REGRESSION, regression_id, update, "path.regression_id")


@writes.post("/regressions", response_model=RegressionRead, status_code=201, responses=errors(409))
def create_regression(
    finding: ManualFinding, session: SessionDep, actor: TriageActor
) -> Regression:
    """Record a step detection missed, at a run of a series (scope `triage`; audited).

    Its levels are the 20 points either side; it joins the alert group of its runs, counts as
    a real finding (a label), and detection does not record the same step again.
    """
    series = session.get(Series, finding.series_id)
    if series is not None:
        tokens_service.check_project(actor.token, series.project, "series_id")
    regression = manual.create(
        session, finding.series_id, finding.first_bad_run_id, actor.label, finding.note
    )
    queue.commit(session)
    return regression


@writes.patch(
    "/regressions/{regression_id}/position", response_model=RegressionRead, responses=errors(409)
)
def move_regression(
    regression_id: RowId, position: StepPosition, session: SessionDep, actor: TriageActor
) -> Regression:
    """Move a step by up to 5 points of its series (scope `triage`; audited).

    The bisect range of a localization follows its last good and first bad runs; its levels
    are taken again at the new place, its triage and alert group stay.
    """
    _own(
        session, actor, triage.find(session, triage.REGRESSION, regression_id), "path.regression_id"
    )
    regression = manual.move(session, regression_id, position.first_bad_run_id, actor.label)
    queue.commit(session)
    return regression


def _configured(request: Request) -> dict[str, dict[str, float]]:
    """BENCHWATCH_DETECTOR_THRESHOLDS of the server answering."""
    return dict(request.app.state.settings.DETECTOR_THRESHOLDS or {})


def _change_point_thresholds(request: Request, series: Series) -> Any:
    """The configured change-point thresholds of a series (BENCHWATCH_DETECTOR_THRESHOLDS)."""
    read = registry.read_thresholds(_configured(request))
    metric = series.metric
    return read.for_series(registry.CHANGE_POINT, series.benchmark.suite, metric.name, metric.kind)


@reads.get("/series/{series_id}/sensitivity", response_model=SensitivityRead, responses=errors(404))
def get_sensitivity(request: Request, series_id: RowId, session: SessionDep) -> dict[str, Any]:
    """How sensitive detection is on a series, and why.

    Its triage record, the learnt factor, the pinned thresholds, and the change-point
    thresholds in use now.
    """
    series = session.get(Series, series_id)
    if series is None:
        raise SeriesNotFound(series_id)
    return sensitivity.describe(session, series, _change_point_thresholds(request, series))


@writes.put("/series/{series_id}/sensitivity", response_model=SensitivityRead)
def set_sensitivity(
    request: Request,
    series_id: RowId,
    update: SensitivityUpdate,
    session: SessionDep,
    actor: TriageActor,
) -> dict[str, Any]:
    """Turn learning from triage on or off, pin thresholds or unpin them.

    Scope `triage`; audited.
    """
    series = session.get(Series, series_id)
    if series is None:
        raise SeriesNotFound(series_id)
    tokens_service.check_project(actor.token, series.project, "path.series_id")
    pinned = update.pinned.model_dump(exclude_none=True) if update.pinned else None
    sensitivity.set_by_person(
        session, series_id, actor.label, update.learning, pinned or None, update.unpin
    )
    queue.commit(session)
    return sensitivity.describe(session, series, _change_point_thresholds(request, series))


@reads.get("/triage-labels", response_model=list[LabelShare])
def triage_labels(
    session: SessionDep, by: Literal["series", "suite", "config", "detector"] = "series"
) -> list[dict[str, Any]]:
    """Labels from triage and the share marked invalid, per series, suite, config or detector.

    Over the newest 5,000 findings.
    """
    return sensitivity.label_shares(session, by)


@writes.post("/backtests", response_model=BacktestReport, responses=errors(404))
def run_backtest(
    request: Request, tried: BacktestRequest, session: SessionDep, actor: TriageActor
) -> dict[str, Any]:
    """Try thresholds before setting them: replayed over stored history, scored by triage.

    What the change-point detector would have found with `thresholds` (over
    BENCHWATCH_DETECTOR_THRESHOLDS) on the selected series (at most 200, their newest 500
    points), against the steps stored there: kept, added, removed, and the precision against
    triage labels now and with the proposal. With `subscription_id`, that subscription's rules
    over the stored steps too. Reads only; scope `triage`, which bounds who makes it work.
    """
    where = SeriesFilter(**tried.select.model_dump())
    try:
        found = backtest.backtest(session, tried.thresholds, _configured(request), where).as_dict()
    except ValueError as exc:
        raise InvalidInput(str(exc), errors=[{"loc": "thresholds", "message": str(exc)}]) from exc
    if tried.subscription_id is not None:
        subscription = get_subscription(session, tried.subscription_id, actor.token)
        found["subscription"] = replay(session, subscription.match, subscription.exclude)
    return found


def failure_filter(
    status: Status | None = None,
    machine: str | None = None,
    channel: str | None = None,
    suite: str | None = None,
    group_id: RowId | None = None,
    open: bool | None = None,
    flaky: bool | None = None,
    failure: FailureKind | None = None,
    severity: Severity | None = None,
    project: ProjectQuery = None,
) -> triage.FailureFilter:
    """The failure listing's filters.

    ``open``: still failing (true) or passing again (false); ``failure``: one kind;
    ``severity``: ``high`` for failing cases, ``low`` for coverage changes.
    """
    return triage.FailureFilter(
        status, machine, channel, suite, group_id, open, flaky, failure, severity, project
    )


FailureWhere = Annotated[triage.FailureFilter, Depends(failure_filter)]


@reads.get("/failures", response_model=Page[CaseFailureRead])
def list_failures(
    session: SessionDep, where: FailureWhere, paging: Paging
) -> Page[CaseFailureRead]:
    """Failing cases and coverage changes, newest first; filter by status, failure, ..."""
    items, total = triage.list_failures(session, where, paging.offset, paging.limit)
    return paging.of([_failure(f) for f in items], total)


@reads.get("/failures/{failure_id}", response_model=CaseFailureRead, responses=errors(404))
def get_failure(failure_id: RowId, session: SessionDep) -> CaseFailureRead:
    """One case failure."""
    return _failure(triage.find(session, triage.FAILURE, failure_id))


@writes.patch("/failures/{failure_id}", response_model=CaseFailureRead)
def update_failure(
    failure_id: RowId, update: TriageUpdate, session: SessionDep, actor: TriageActor
) -> CaseFailureRead:
    """Triage a case failure: status, assignee, note, bug link (scope `triage`)."""
    failure = _triage(session, actor, triage.FAILURE, failure_id, update, "path.failure_id")
    return _failure(failure)


def _failure(failure: CaseFailure) -> CaseFailureRead:
    return CaseFailureRead(**described.describe_failure(failure))


def aggregate_filter(
    status: Status | None = None,
    machine: str | None = None,
    channel: str | None = None,
    suite: str | None = None,
    config: str | None = None,
    stat: AggregateStat | None = None,
    rule: AggregateRule | None = None,
    group_id: RowId | None = None,
    open: bool | None = None,
    project: ProjectQuery = None,
) -> triage.AggregateFilter:
    """The aggregate listing's filters; ``open``: not recovered yet (true) or recovered."""
    return triage.AggregateFilter(
        status, machine, channel, suite, config, stat, rule, group_id, open, project
    )


AggregateWhere = Annotated[triage.AggregateFilter, Depends(aggregate_filter)]


@reads.get("/aggregate-findings", response_model=Page[AggregateFindingRead])
def list_aggregate_findings(
    session: SessionDep, where: AggregateWhere, paging: Paging
) -> Page[AggregateFindingRead]:
    """Dashboard aggregates (pass rate, geomean speedup, ...) that got worse, newest first."""
    items, total = triage.list_aggregates(session, where, paging.offset, paging.limit)
    return paging.of([_aggregate(f) for f in items], total)


@reads.get(
    "/aggregate-findings/{finding_id}",
    response_model=AggregateFindingRead,
    responses=errors(404),
)
def get_aggregate_finding(finding_id: RowId, session: SessionDep) -> AggregateFindingRead:
    """One aggregate finding."""
    return _aggregate(triage.find(session, triage.AGGREGATE, finding_id))


@writes.patch("/aggregate-findings/{finding_id}", response_model=AggregateFindingRead)
def update_aggregate_finding(
    finding_id: RowId, update: TriageUpdate, session: SessionDep, actor: TriageActor
) -> AggregateFindingRead:
    """Triage an aggregate finding: status, assignee, note, bug link (scope `triage`)."""
    finding = _triage(session, actor, triage.AGGREGATE, finding_id, update, "path.finding_id")
    return _aggregate(finding)


def _aggregate(finding: AggregateFinding) -> AggregateFindingRead:
    return AggregateFindingRead(**described.describe_aggregate(finding))


@writes.post("/triage", response_model=BulkTriaged)
def bulk_triage(body: BulkTriage, session: SessionDep, actor: TriageActor) -> BulkTriaged:
    """Triage many findings at once (scope `triage`), each as one is triaged and audited.

    Give `ids` (regressions, failures, aggregates, groups: 500 in all at most) or one filter
    (`regressions` or `groups`, the fields of their listings: a 422 when it matches more than
    500); `update` is applied to every one. All or nothing: a finding of another project (403)
    or one that does not exist (404) changes none.
    """
    given = [body.ids is not None, body.regressions is not None, body.groups is not None]
    if sum(given) != 1:
        raise InvalidInput(
            "give exactly one of ids, regressions (a filter) or groups (a filter)",
            errors=[{"loc": "body", "field": "ids", "message": "one of ids, regressions, groups"}],
        )
    if body.ids is not None:
        picked = bulk_triage_service.ids_of(body.ids.model_dump())
    elif body.regressions is not None:
        picked = bulk_triage_service.by_filter(
            session, regressions=triage.RegressionFilter(**body.regressions.model_dump())
        )
    else:
        assert body.groups is not None
        picked = bulk_triage_service.by_filter(
            session, groups=bulk_triage_service.GroupFilter(**body.groups.model_dump())
        )
    changed = bulk_triage_service.apply(
        session, picked, body.update, actor.label, lambda row, loc: _own(session, actor, row, loc)
    )
    queue.commit(session)
    return BulkTriaged(changed=changed, count=sum(len(ids) for ids in changed.values()))


@reads.get("/alert-groups", response_model=Page[AlertGroupRead])
def list_alert_groups(
    request: Request,
    session: SessionDep,
    paging: Paging,
    status: Status | None = None,
    machine: str | None = None,
    channel: str | None = None,
    since: QueryTime | None = None,
    project: ProjectQuery = None,
    overdue: Annotated[
        bool, Query(description="only those past a deadline (still new, or without a bug)")
    ] = False,
) -> Page[AlertGroupRead]:
    """Alert groups, newest first; a group's status is its most pressing member's.

    Each says when it is due to be triaged and to have a bug link (working days after it
    was found: BENCHWATCH_TRIAGE_DAYS, BENCHWATCH_BUG_DAYS), and whether it is overdue.
    """
    rules = deadline_rules(request)
    groups, total = triage.list_groups(
        session,
        status,
        machine,
        channel,
        since,
        paging.offset,
        paging.limit,
        project,
        with_steps=False,
        overdue=triage.Overdue.now(rules) if overdue else None,
    )
    items = [AlertGroupRead(**g) for g in described.describe_groups(session, groups, rules)]
    return paging.of(items, total)


def deadline_rules(request: Request) -> Deadlines:
    """The triage deadlines the server is configured with."""
    return Deadlines.of(request.app.state.settings)


@reads.get("/alert-groups/{group_id}", response_model=AlertGroupDetail, responses=errors(404))
def get_alert_group(request: Request, group_id: RowId, session: SessionDep) -> AlertGroupDetail:
    """One alert group with its regressions, failures, aggregate findings and silences."""
    return _detail(session, triage.get_group(session, group_id), deadline_rules(request))


@writes.patch("/alert-groups/{group_id}", response_model=AlertGroupDetail)
def update_alert_group(
    request: Request,
    group_id: RowId,
    update: TriageUpdate,
    session: SessionDep,
    actor: TriageActor,
) -> AlertGroupDetail:
    """Triage a whole group: the status and fields apply to every member (scope `triage`)."""
    group = _triage(session, actor, triage.GROUP, group_id, update, "path.group_id")
    return _detail(session, group, deadline_rules(request))


def _detail(session: SessionDep, group: AlertGroup, rules: Deadlines) -> AlertGroupDetail:
    return AlertGroupDetail(
        **described.describe_group(session, group, rules=rules),
        regressions=[RegressionRead.model_validate(r) for r in group.regressions],
        failures=[_failure(f) for f in group.failures],
        silences=[MachineSilenceRead.model_validate(s) for s in group.silences],
        aggregates=[_aggregate(a) for a in group.aggregates],
    )


@reads.get("/revisions/{revision}", response_model=RevisionRead, responses=errors(404, 422))
def get_revision(request: Request, revision: str, session: SessionDep) -> RevisionRead:
    """Everything one change moved: the alert groups whose first bad run carries `revision`.

    A commit, a torch build or a torch git sha (7 hex digits or more match the shas they
    begin), across machines, channels and projects: the groups (newest first, at most 500),
    their steps that hurt and failing cases counted by device, suite, config and precision,
    and the 20 worst steps. A revision no group's first bad run carries is a 404.
    """
    report = revisions.revision_report(session, revision)
    if not report.groups:
        raise NotFound(f"no alert group's first bad run carries {report.revision!r}")
    rules = deadline_rules(request)
    return RevisionRead(
        **revisions.describe(report),
        groups=[
            AlertGroupRead(**g) for g in described.describe_groups(session, report.groups, rules)
        ],
        worst=[RegressionRead.model_validate(r) for r in report.worst],
    )


@reads.get("/run-anomalies", response_model=list[RunAnomalyRead])
def list_run_anomalies(
    session: SessionDep,
    machine: str | None = None,
    anomalous: bool | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    project: ProjectQuery = None,
) -> list[RunAnomaly]:
    """Runs scored by the IsolationForest (a secondary signal shown beside the steps)."""
    return triage.list_run_anomalies(session, machine, anomalous, limit, project)
