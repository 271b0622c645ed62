"""Invalidate a run (it leaves history, its findings are withdrawn), restore it, or delete it.

An invalidated run's results move from ``result`` to ``invalidated_result``: every reader of
history, baselines and aggregates reads ``result`` alone, so none needs to know. The steps,
failures and aggregate findings the run caused are withdrawn (``invalid``, with the reason),
and detection judges its series and its machine and channel again, so a real step elsewhere
stands and the level before the run is the baseline again. Deleting does the same, then
removes the run's rows and detaches or removes what points at it. Restoring undoes an
invalidation: the results come back and detection judges the same series and place again, so
a step the run really showed is found again (as a new finding; the withdrawn ones stay
withdrawn, with their history).
"""

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import ColumnElement, delete, insert, or_, select, update
from sqlalchemy.orm import Session

from app.anomalies import service as detection
from app.anomalies.locks import hold_machine_channel
from app.anomalies.models import (
    AggregateFinding,
    AggregatePoint,
    AlertGroup,
    CaseFailure,
    MachineSilence,
    Regression,
    RunAnomaly,
)
from app.audit import service as audit
from app.audit.models import AuditEntry
from app.benchmarks.models import Series
from app.core.db import utcnow
from app.core.errors import Conflict
from app.notifications.models import Notice
from app.runs.branches import is_branch_channel
from app.runs.models import INVALID, InvalidatedResult, Result, Run, RunShard
from app.runs.reads import get_run
from app.suite_runs.models import SuiteRun
from app.tokens import service as tokens_service
from app.tokens.models import ApiToken

MAX_REASON = 2_000
_RESULT_COLUMNS = (
    "run_id",
    "series_id",
    "measured_at",
    "status",
    "value",
    "samples",
    "text_value",
    "reason",
    "extra",
    "spread",
)
_RUN_FIELDS = ("status", "invalidated_at", "invalidated_by", "invalidated_reason")


class AlreadyInvalid(Conflict):
    """The run was invalidated before."""

    def __init__(self, run_id: int) -> None:
        super().__init__(f"run {run_id} is already invalidated")


class NotInvalid(Conflict):
    """Only an invalidated run can be restored."""

    def __init__(self, run_id: int) -> None:
        super().__init__(f"run {run_id} is not invalidated")


@dataclass
class Correction:
    """What invalidating (or deleting) a run changed."""

    run_id: int
    withdrawn_regressions: list[int] = field(default_factory=list)
    withdrawn_failures: list[int] = field(default_factory=list)
    withdrawn_aggregates: list[int] = field(default_factory=list)
    new_regressions: list[int] = field(default_factory=list)
    reopened_regressions: list[int] = field(default_factory=list)
    reopened_failures: list[int] = field(default_factory=list)
    reopened_aggregates: list[int] = field(default_factory=list)
    deleted: bool = False

    def summary(self) -> dict[str, Any]:
        """The audit log's ``after`` (ids, bounded there)."""
        return {
            "withdrawn_regressions": self.withdrawn_regressions,
            "withdrawn_failures": self.withdrawn_failures,
            "withdrawn_aggregates": self.withdrawn_aggregates,
            "new_regressions": self.new_regressions,
            "reopened_regressions": self.reopened_regressions,
            "reopened_failures": self.reopened_failures,
            "reopened_aggregates": self.reopened_aggregates,
        }


def check_project(session: Session, token: ApiToken, run_id: int, loc: str) -> None:
    """403 when the token is limited to another project than the run's.

    Raises:
        RunNotFound: no such run.
        ProjectNotAllowed: the token may not write for the run's project.
    """
    tokens_service.check_project(token, get_run(session, run_id).project, loc)


def _by_correction(run_id: int) -> str:
    """``triaged_by`` of what invalidating the run withdrew (and restoring it takes back)."""
    return f"correction: run {run_id} invalidated"


def _why(run: Run) -> str:
    return f"run {run.id} invalidated: {run.invalidated_reason}"[:500]


def invalidate(
    session: Session,
    run_id: int,
    reason: str,
    actor: str,
    thresholds: dict[str, Any] | None = None,
) -> Correction:
    """Take the run out of history, withdraw what it caused, judge its series again.

    Raises:
        RunNotFound: no such run.
        AlreadyInvalid: it was invalidated before.
    """
    run = get_run(session, run_id)
    if run.status == INVALID:
        raise AlreadyInvalid(run_id)
    before = audit.fields(run, _RUN_FIELDS)
    correction = _invalidate(session, run, reason, actor, thresholds)
    audit.record(
        session,
        actor,
        "run.invalidate",
        f"run:{run.id}",
        before,
        {**audit.fields(run, _RUN_FIELDS), **correction.summary()},
    )
    return correction


def _invalidate(
    session: Session,
    run: Run,
    reason: str,
    actor: str,
    thresholds: dict[str, Any] | None,
) -> Correction:
    hold_machine_channel(session, run)  # detection of this machine and channel waits
    correction = Correction(run.id)
    series_ids = list(session.scalars(select(Result.series_id).where(Result.run_id == run.id)))
    columns = [getattr(Result, name) for name in _RESULT_COLUMNS]
    session.execute(
        insert(InvalidatedResult).from_select(
            list(_RESULT_COLUMNS), select(*columns).where(Result.run_id == run.id)
        )
    )
    session.execute(delete(Result).where(Result.run_id == run.id))
    session.execute(delete(AggregatePoint).where(AggregatePoint.run_id == run.id))
    session.execute(delete(RunAnomaly).where(RunAnomaly.run_id == run.id))
    run.status = INVALID
    run.invalidated_at = utcnow()
    run.invalidated_by = actor[:200]
    run.invalidated_reason = reason[:MAX_REASON]
    why = {"why": _why(run), "run_id": run.id, "by": run.invalidated_by}
    for regression in session.scalars(
        select(Regression).where(Regression.first_bad_run_id == run.id).order_by(Regression.id)
    ):
        detection.withdraw(regression, {**why, "state": regression.state})
        if regression.triaged_by == detection.WITHDRAWN_BY:
            regression.triaged_by = _by_correction(run.id)
        correction.withdrawn_regressions.append(regression.id)
    for regression in session.scalars(
        select(Regression).where(
            Regression.last_good_run_id == run.id, Regression.first_bad_run_id != run.id
        )
    ):
        _move_last_good(session, regression, run, why, correction)
    for failure in session.scalars(
        select(CaseFailure).where(
            or_(
                CaseFailure.first_failing_run_id == run.id,
                CaseFailure.last_passing_run_id == run.id,
            )
        )
    ):
        if failure.first_failing_run_id != run.id and _move_last_passing(session, failure):
            continue  # the case failed in a valid run: the run before the invalid one passed
        _withdraw_finding(failure, run)
        correction.withdrawn_failures.append(failure.id)
    for finding in session.scalars(
        select(AggregateFinding).where(
            or_(
                AggregateFinding.first_bad_run_id == run.id,
                AggregateFinding.last_good_run_id == run.id,
            )
        )
    ):
        _withdraw_finding(finding, run)
        correction.withdrawn_aggregates.append(finding.id)
    session.flush()
    if not is_branch_channel(run.channel):  # a branch's runs are judged by verdicts instead
        found = detection.rejudge(
            session, series_ids, run.machine_id, run.channel, thresholds, run.project
        )
        correction.new_regressions = [r.id for r in found.regressions]
    session.flush()
    return correction


def restore(
    session: Session,
    run_id: int,
    actor: str,
    thresholds: dict[str, Any] | None = None,
) -> Correction:
    """Put an invalidated run back into history and judge its series and place again.

    Raises:
        RunNotFound: no such run.
        NotInvalid: the run is not invalidated.
    """
    run = get_run(session, run_id)
    if run.status != INVALID:
        raise NotInvalid(run_id)
    hold_machine_channel(session, run)
    before = audit.fields(run, _RUN_FIELDS)
    columns = [getattr(InvalidatedResult, name) for name in _RESULT_COLUMNS]
    session.execute(
        insert(Result).from_select(
            list(_RESULT_COLUMNS), select(*columns).where(InvalidatedResult.run_id == run.id)
        )
    )
    session.execute(delete(InvalidatedResult).where(InvalidatedResult.run_id == run.id))
    invalidation = _last_invalidation(session, run.id)
    status = invalidation.before.get("status") if invalidation else None
    run.status = status if isinstance(status, str) and status not in ("", INVALID) else "completed"
    run.invalidated_at = None
    run.invalidated_by = run.invalidated_reason = ""
    correction = Correction(run.id)
    _take_back(session, run.id, invalidation.after if invalidation else {}, correction)
    session.flush()
    if not is_branch_channel(run.channel):
        series_ids = list(session.scalars(select(Result.series_id).where(Result.run_id == run.id)))
        found = detection.rejudge(
            session, series_ids, run.machine_id, run.channel, thresholds, run.project
        )
        correction.new_regressions = [r.id for r in found.regressions]
    audit.record(
        session,
        actor,
        "run.restore",
        f"run:{run.id}",
        before,
        {**audit.fields(run, _RUN_FIELDS), **correction.summary()},
    )
    session.flush()
    return correction


def _last_invalidation(session: Session, run_id: int) -> AuditEntry | None:
    """The audit log's entry of the run's last invalidation (its status, what it changed)."""
    return session.scalar(
        select(AuditEntry)
        .where(AuditEntry.action == "run.invalidate", AuditEntry.target == f"run:{run_id}")
        .order_by(AuditEntry.id.desc())
        .limit(1)
    )


def _take_back(
    session: Session, run_id: int, invalidated: dict[str, Any], correction: Correction
) -> None:
    """Undo what invalidating the run did to findings nobody triaged since.

    The findings it withdrew are open again (a step in the state it had); the steps that
    judging its series again found without it are withdrawn, for the run explains them.
    """
    by = _by_correction(run_id)
    for regression in session.scalars(select(Regression).where(Regression.triaged_by == by)):
        withdrawn = regression.confirmation.get("withdrawn") or {}
        if regression.status == "invalid" and withdrawn.get("run_id") == run_id:
            regression.status, regression.triaged_by, regression.triaged_at = "new", "", None
            regression.state = str(withdrawn.get("state") or "suspected")
            regression.confirmation = {
                **{k: v for k, v in regression.confirmation.items() if k != "withdrawn"},
                "restored": {"run_id": run_id, "withdrawn": withdrawn},
            }
            correction.reopened_regressions.append(regression.id)
    findings: list[CaseFailure | AggregateFinding] = [
        *session.scalars(select(CaseFailure).where(CaseFailure.triaged_by == by)),
        *session.scalars(select(AggregateFinding).where(AggregateFinding.triaged_by == by)),
    ]
    for finding in findings:
        if finding.status != "invalid":
            continue
        finding.status, finding.triaged_by, finding.triaged_at = "new", "", None
        finding.note = (finding.note + "\n" if finding.note else "") + f"run {run_id} restored"
        if isinstance(finding, CaseFailure):
            correction.reopened_failures.append(finding.id)
        else:
            correction.reopened_aggregates.append(finding.id)
    found_without = [i for i in invalidated.get("new_regressions") or [] if isinstance(i, int)]
    why = {"why": f"run {run_id} restored", "run_id": run_id}
    for regression in session.scalars(
        select(Regression).where(Regression.id.in_(found_without), Regression.status == "new")
    ):
        detection.withdraw(regression, why)
        correction.withdrawn_regressions.append(regression.id)


def _move_last_good(
    session: Session,
    regression: Regression,
    run: Run,
    why: dict[str, Any],
    correction: Correction,
) -> None:
    """A step whose last good run was the invalid one: the point before it, or withdrawn."""
    first_bad_at = session.scalar(
        select(Result.measured_at).where(
            Result.series_id == regression.series_id,
            Result.run_id == regression.first_bad_run_id,
        )
    )
    previous = None
    if first_bad_at is not None:
        previous = session.scalar(
            select(Result.run_id)
            .where(
                Result.series_id == regression.series_id,
                Result.measured_at < first_bad_at,
                Result.status == "ok",
            )
            .order_by(Result.measured_at.desc(), Result.run_id.desc())
            .limit(1)
        )
    if previous is not None:
        regression.last_good_run_id = previous
        return
    detection.withdraw(regression, {**why, "state": regression.state})
    if regression.triaged_by == detection.WITHDRAWN_BY:
        regression.triaged_by = _by_correction(run.id)
    correction.withdrawn_regressions.append(regression.id)


def _move_last_passing(session: Session, failure: CaseFailure) -> bool:
    """A failure whose last passing run was the invalid one: the case's ok result before."""
    first_failing = session.get_one(Run, failure.first_failing_run_id)
    previous = session.scalar(
        select(Result.run_id)
        .join(Series, Result.series_id == Series.id)
        .where(
            Series.benchmark_id == failure.benchmark_id,
            Series.machine_id == failure.machine_id,
            Series.channel == failure.channel,
            Result.status == "ok",
            Result.measured_at < first_failing.started_at,
        )
        .order_by(Result.measured_at.desc(), Result.run_id.desc())
        .limit(1)
    )
    if previous is None:
        return False
    failure.last_passing_run_id = previous
    return True


def _withdraw_finding(finding: CaseFailure | AggregateFinding, run: Run) -> None:
    """A failure or aggregate finding the invalid run made: ``invalid`` unless triaged."""
    if finding.status == "new":
        finding.status = "invalid"
        finding.triaged_by = _by_correction(run.id)
        finding.triaged_at = utcnow()
        finding.note = (finding.note + "\n" if finding.note else "") + _why(run)


def delete_run(
    session: Session,
    run_id: int,
    reason: str,
    actor: str,
    thresholds: dict[str, Any] | None = None,
) -> Correction:
    """Invalidate the run (unless it was), then remove it and what points at it.

    Findings anchored on it go (they were withdrawn); other references are cleared; an alert
    group anchored on it moves to a remaining member's runs, or goes with its notices
    detached.

    Raises:
        RunNotFound: no such run.
    """
    run = get_run(session, run_id)
    before = audit.fields(run, ("project", "key", "machine_id", "channel", "commit", *_RUN_FIELDS))
    before["started_at"] = run.started_at.isoformat()
    if run.status == INVALID:
        correction = Correction(run.id)
        hold_machine_channel(session, run)
    else:
        correction = _invalidate(session, run, reason, actor, thresholds)
    remove_references(session, run.id)
    session.delete(run)
    session.flush()
    correction.deleted = True
    audit.record(
        session,
        actor,
        "run.delete",
        f"run:{run_id}",
        before,
        {"deleted": True, "reason": reason[:500], **correction.summary()},
    )
    return correction


def remove_references(session: Session, run_id: int) -> None:
    """Every row that points at the run: removed when anchored on it, else detached."""
    session.execute(delete(InvalidatedResult).where(InvalidatedResult.run_id == run_id))
    session.execute(delete(Result).where(Result.run_id == run_id))
    session.execute(delete(RunShard).where(RunShard.run_id == run_id))
    session.execute(update(SuiteRun).where(SuiteRun.run_id == run_id).values(run_id=None))
    session.execute(delete(AggregatePoint).where(AggregatePoint.run_id == run_id))
    session.execute(delete(RunAnomaly).where(RunAnomaly.run_id == run_id))
    for column in (Regression.reverted_by_run_id, Regression.found_by_run_id):
        session.execute(update(Regression).where(column == run_id).values({column: None}))
    session.execute(
        update(CaseFailure)
        .where(CaseFailure.passing_again_run_id == run_id)
        .values(passing_again_run_id=None)
    )
    session.execute(
        update(MachineSilence)
        .where(MachineSilence.ended_by_run_id == run_id)
        .values(ended_by_run_id=None)
    )
    session.execute(
        update(AggregateFinding)
        .where(AggregateFinding.resolved_run_id == run_id)
        .values(resolved_run_id=None)
    )
    touched: set[int] = set()
    anchored: tuple[tuple[type[Any], ColumnElement[bool]], ...] = (
        (
            Regression,
            or_(Regression.first_bad_run_id == run_id, Regression.last_good_run_id == run_id),
        ),
        (
            CaseFailure,
            or_(
                CaseFailure.first_failing_run_id == run_id,
                CaseFailure.last_passing_run_id == run_id,
            ),
        ),
        (MachineSilence, MachineSilence.last_run_id == run_id),
        (
            AggregateFinding,
            or_(
                AggregateFinding.first_bad_run_id == run_id,
                AggregateFinding.last_good_run_id == run_id,
            ),
        ),
    )
    for model, condition in anchored:
        for finding in session.scalars(select(model).where(condition)):
            touched.add(finding.group_id)
            session.delete(finding)
    session.flush()
    groups = select(AlertGroup).where(
        or_(
            AlertGroup.id.in_(touched),
            AlertGroup.first_bad_run_id == run_id,
            AlertGroup.last_good_run_id == run_id,
        )
    )
    for group in session.scalars(groups):
        session.refresh(group)
        _reanchor_or_drop(session, group, run_id)
    session.flush()


def _reanchor_or_drop(session: Session, group: AlertGroup, run_id: int) -> None:
    members: list[Any] = [*group.regressions, *group.failures, *group.aggregates]
    if not members and not group.silences:
        session.execute(update(Notice).where(Notice.group_id == group.id).values(group_id=None))
        session.delete(group)
        return
    if group.first_bad_run_id != run_id and group.last_good_run_id != run_id:
        return
    if members:
        first = members[0]
        group.first_bad_run_id = (
            getattr(first, "first_bad_run_id", None) or first.first_failing_run_id
        )
        group.last_good_run_id = (
            getattr(first, "last_good_run_id", None) or first.last_passing_run_id
        )
    else:
        silence = group.silences[0]
        group.first_bad_run_id = group.last_good_run_id = silence.last_run_id
