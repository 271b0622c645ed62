"""Detection over stored series: find steps after each run, group them, explain them.

The detectors (``registry.DETECTORS``) know nothing of directions or runs; here a step one
of them finds gets its runs (last good, first bad), its direction from the metric, an alert
group and the environment diff between the two runs (``grouping``), and hints from
correlated metrics (``explain``); each run is also scored as a whole (``outliers``).
Detection is idempotent: a step already recorded (at the same place, give or take the
change-point detector's refinement radius) is not recorded again, whatever its triage status
or the detector that finds it, so an accepted step becomes the baseline.

A step whose newest points are far beyond the series' noise is recorded before the
detectors can confirm it, as ``suspected`` (``suspects``); it becomes ``confirmed`` when a
detector finds it, or ``withdrawn`` when the series comes back or the test does not agree in
time. Only one step of a series is suspected at a time.

A shape change (``shapes``: the noise rose, or the points split into two modes, the level
unmoved) is recorded the same way, as a finding whose ``direction`` is its kind (``noise``,
``bimodal``), grouped and notified like a step. Steps and shape changes are told apart when a
finding is matched to the one recorded near it, and only steps revert steps or start the
level a suspected step is judged against.
"""

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from app.anomalies import (
    aggregate_findings,
    confirmation,
    explain,
    failures,
    grouping,
    outliers,
    registry,
    sensitivity,
    silence,
    suspects,
)
from app.anomalies.detector_interface import (
    Detector,
    DetectorThresholds,
    SeriesHistory,
    Thresholds,
)
from app.anomalies.detectors import REFINE_RADIUS, SHAPES, ChangePoint
from app.anomalies.history import History, load_histories, load_samples
from app.anomalies.locks import hold_machine_channel
from app.anomalies.models import (
    CaseFailure,
    MachineSilence,
    Regression,
    RunAnomaly,
)
from app.benchmarks.comparison import direction
from app.benchmarks.models import Benchmark, Machine, Metric, Series
from app.core.bulk import member_of
from app.core.db import utcnow
from app.runs.branches import is_branch_channel
from app.runs.models import Result, Run
from app.runs.reads import get_run
from app.runs.shards import COMPLETED

INCREMENTAL_POINTS = 60  # history loaded per series after a run: 3 windows
END_OF_TIME = datetime(9999, 1, 1, tzinfo=UTC)
OVERDUE_BATCH = 500  # runs queued again per sweep


@dataclass
class Detection:
    """What one detection pass recorded."""

    regressions: list[Regression]
    reverted: list[Regression]
    anomaly: RunAnomaly | None = None
    suspected: list[Regression] = field(default_factory=list)  # new, also in regressions
    confirmed: list[Regression] = field(default_factory=list)  # suspected before, now found
    withdrawn: list[Regression] = field(default_factory=list)
    failures: list[CaseFailure] = field(default_factory=list)  # cases that began failing
    passing_again: list[CaseFailure] = field(default_factory=list)
    silences_ended: list[MachineSilence] = field(default_factory=list)


def detect_for_run(
    session: Session, run_id: int, thresholds: Thresholds | None = None
) -> Detection:
    """Judge the newest points of every series a run touched, with the history before them.

    Raises:
        ValueError: ``thresholds`` has a key or field no detector knows.
    """
    read = registry.read_thresholds(thresholds or {})
    run = get_run(session, run_id)
    if run.status != COMPLETED:
        return Detection([], [])  # a sharded run waits for its shards
    if is_branch_channel(run.channel):  # a branch's run is judged by its verdicts instead
        run.detected_at = utcnow()
        return Detection([], [])
    hold_machine_channel(session, run)
    series = _series_keys(session, select(Result.series_id).where(Result.run_id == run_id))
    histories = load_histories(session, [s.id for s in series], run.started_at, INCREMENTAL_POINTS)
    # A run where everything moved at once is odd before it is a step: its points alone
    # make nothing suspected (the next run may).
    anomaly = outliers.record_score(session, run, histories)
    detection = _detect(session, series, histories, read, single_points=not anomaly.anomalous)
    detection.anomaly = anomaly
    judged = failures.judge_run(session, run)
    detection.failures, detection.passing_again = judged.opened, judged.passing_again
    grouping.group_failures(session, judged.opened, run)
    aggregate_findings.judge_run(session, run)  # after failures: they explain aggregates
    detection.silences_ended = silence.end_silences(session, run)
    for regression in detection.regressions:
        regression.found_by_run_id = run.id
    run.detected_at = utcnow()
    session.flush()
    confirmation.request_reruns(session, detection.suspected)  # a worker's cases: re-run them
    return detection


def overdue_runs(session: Session, older_than: timedelta, limit: int = OVERDUE_BATCH) -> list[int]:
    """Runs stored more than ``older_than`` ago whose detection has not finished, oldest first.

    Their task was lost: the broker was down when the upload committed, or a worker died
    holding it. ``jobs.sweep_detection`` queues them again.
    """
    cutoff = utcnow() - older_than
    query = select(Run.id).where(
        Run.detected_at.is_(None), Run.created_at < cutoff, Run.status == COMPLETED
    )
    return list(session.scalars(query.order_by(Run.id).limit(limit)))


def rescan(
    session: Session, thresholds: Thresholds | None = None, machine: str | None = None
) -> Detection:
    """Run the detectors over the whole history of every series (of one machine, if given).

    Raises:
        ValueError: ``thresholds`` has a key or field no detector knows.
    """
    read = registry.read_thresholds(thresholds or {})
    ids = select(Series.id)
    if machine is not None:
        ids = ids.join(Machine, Series.machine_id == Machine.id).where(Machine.name == machine)
    detection = _detect_whole(session, _series_keys(session, ids), read)
    detection.failures, detection.passing_again = _rescan_failures(session, machine)
    aggregate_findings.rescan(session, machine)
    session.flush()
    return detection


def _detect_whole(
    session: Session, series: Sequence["SeriesKey"], read: DetectorThresholds
) -> Detection:
    """The detectors over the whole history of each series, 500 series at a time."""
    detection = Detection([], [])
    for part in range(0, len(series), 500):
        chunk = series[part : part + 500]
        histories = load_histories(session, [s.id for s in chunk], END_OF_TIME, None)
        found = _detect(session, chunk, histories, read)
        detection.regressions += found.regressions
        detection.reverted += found.reverted
        detection.suspected += found.suspected
        detection.confirmed += found.confirmed
        detection.withdrawn += found.withdrawn
    return detection


def _rescan_failures(
    session: Session, machine: str | None
) -> tuple[list[CaseFailure], list[CaseFailure]]:
    """Every run of every machine and channel judged again for failing cases, in order."""
    pairs = select(Run.machine_id, Run.channel).distinct().order_by(Run.machine_id, Run.channel)
    if machine is not None:
        pairs = pairs.join(Machine, Run.machine_id == Machine.id).where(Machine.name == machine)
    opened: list[CaseFailure] = []
    passing_again: list[CaseFailure] = []
    for machine_id, channel in session.execute(pairs).all():
        for run, judged in failures.rescan_runs(session, machine_id, channel):
            grouping.group_failures(session, judged.opened, run)
            opened += judged.opened
            passing_again += judged.passing_again
    return opened, passing_again


@dataclass(frozen=True)
class SeriesKey:
    """What detection needs to know of a series before it finds anything."""

    id: int
    suite: str
    metric: str
    kind: str  # the metric's


def _series_keys(session: Session, ids: Select[Any]) -> list[SeriesKey]:
    query = (
        select(Series.id, Benchmark.suite, Metric.name, Metric.kind)
        .join(Benchmark, Series.benchmark_id == Benchmark.id)
        .join(Metric, Series.metric_id == Metric.id)
        .where(Series.id.in_(ids))
        .order_by(Series.id)
    )
    return [SeriesKey(*row) for row in session.connection().execute(query)]


def _detect(
    session: Session,
    series: Sequence[SeriesKey],
    histories: Mapping[int, History],
    thresholds: DetectorThresholds,
    single_points: bool = True,
) -> Detection:
    """Steps in the series' histories; ``single_points``: may one point make a step suspected."""
    known = _regressions_by_series(session, [s.id for s in series])
    tuned = sensitivity.settings_of(session, [s.id for s in series])
    detection = Detection([], [])
    for one in series:
        history = histories.get(one.id)
        if history is None:
            continue
        samples = partial(load_samples, session, one.id, history.run_ids)
        view = SeriesHistory(one.suite, one.metric, history.values, history.run_ids, samples)
        view.kind, view.spreads = one.kind, history.spreads
        change_point = sensitivity.adjusted(
            thresholds.for_series(registry.CHANGE_POINT, one.suite, one.metric, one.kind),
            tuned.get(one.id),
        )
        for detector in registry.DETECTORS:
            found_by = Finder(
                detector,
                change_point
                if detector is registry.CHANGE_POINT
                else thresholds.for_series(detector, one.suite, one.metric, one.kind),
            )
            for change in detector.find(view, found_by.thresholds):
                if change.kind not in SHAPES:
                    view.steps.append(change.index)
                stored = session.get_one(Series, one.id)
                recorded = _record(stored, history, change, found_by, known[one.id], detection)
                if recorded is not None:
                    known[one.id].append(recorded)
        judged = SeriesScan(history, view.steps, change_point, single_points)
        _judge_suspects(session, one, judged, known[one.id], detection)
    if detection.regressions:  # grouping adds them to the session
        _group_and_explain(session, detection.regressions)
    return detection


def _regressions_by_series(
    session: Session, series_ids: Sequence[int]
) -> dict[int, list[Regression]]:
    found: dict[int, list[Regression]] = defaultdict(list)
    for condition in member_of(session, Regression.series_id, sorted(series_ids)):
        for regression in session.scalars(
            select(Regression).where(condition).order_by(Regression.id)
        ):
            found[regression.series_id].append(regression)
    return found


@dataclass(frozen=True)
class Finder:
    """The detector that found a step, with the thresholds it used on that series."""

    detector: Detector[Any]
    thresholds: Any

    def describe(self) -> dict[str, Any]:
        """What ``Regression.detector`` stores: its name, then its thresholds' fields."""
        return {"name": self.detector.name, **asdict(self.thresholds)}

    def same_level(self, level: float, other: float) -> bool:
        """Whether ``other`` is back at ``level``, by the detector's tolerance."""
        return abs(other - level) <= self.detector.level_tolerance(self.thresholds) * abs(level)


def _record(
    series: Series,
    history: History,
    change: ChangePoint,
    found_by: Finder,
    known: list[Regression],
    detection: Detection,
) -> Regression | None:
    position = {run_id: i for i, run_id in enumerate(history.run_ids)}
    # The recorded step the change finds again: an open one before a withdrawn one, then the
    # nearest, then the older. A step withdrawn one run away (found while the change's first
    # bad run was invalidated) must not be revived beside the step at the change itself.
    close = [
        regression
        for regression in known
        if (at := position.get(regression.first_bad_run_id)) is not None
        and abs(at - change.index) <= REFINE_RADIUS
    ]
    shape = change.kind in SHAPES
    near = [regression for regression in close if regression.is_shape == shape]
    around = [regression for regression in close if regression.is_shape != shape]
    if around and shape:
        return None  # a recorded step is there: the shape is the step's
    if around and not near:  # a shape change recorded where a step is found: it was the step
        was = min(around, key=lambda one: abs(position[one.first_bad_run_id] - change.index))
        kind = was.direction
        _confirm(was, series, history, change, found_by)
        was.confirmation = {**was.confirmation, "was": kind}
        detection.confirmed.append(was)
        return None
    if near:
        regression = min(
            near,
            key=lambda one: (
                one.status == "invalid",
                abs(position[one.first_bad_run_id] - change.index),
                math.inf if one.id is None else one.id,
            ),
        )
        if regression.state != "confirmed":  # suspected (or withdrawn) before: now found
            _confirm(regression, series, history, change, found_by)
            detection.confirmed.append(regression)
            _mark_reverted(regression, change, found_by, known, position, detection)
        return None  # already recorded: its triage stands
    regression = _regression(series, history, change, found_by.describe())
    _mark_reverted(regression, change, found_by, known, position, detection)
    detection.regressions.append(regression)
    return regression


def _mark_reverted(
    regression: Regression,
    change: ChangePoint,
    found_by: Finder,
    known: list[Regression],
    position: Mapping[int, int],
    detection: Detection,
) -> None:
    """Mark the earlier steps that ``regression``, found as ``change``, takes back."""
    if regression.is_shape:
        return
    for earlier in known:
        if earlier is not regression and _reverts(earlier, change, found_by, position):
            earlier.reverted = True
            earlier.reverted_by_run_id = regression.first_bad_run_id
            hint = f"reverts the step of regression {earlier.id}"
            regression.hints = [*(regression.hints or []), hint]
            detection.reverted.append(earlier)


def _last_good(history: History, index: int) -> int:
    """The run of the last observed point before ``index``."""
    return next(
        history.run_ids[i]
        for i in range(index - 1, -1, -1)
        if history.values[i] == history.values[i]  # not NaN
    )


def _regression(
    series: Series, history: History, change: ChangePoint, detector: dict[str, Any]
) -> Regression:
    shape = change.kind in SHAPES
    return Regression(
        series_id=series.id,
        series=series,
        last_good_run_id=_last_good(history, change.index),
        first_bad_run_id=history.run_ids[change.index],
        direction=change.kind if shape else _direction(series.metric, change.rel_change),
        before=change.before,
        after=change.after,
        before_spread=change.before_spread,
        after_spread=change.after_spread,
        rel_change=change.rel_change,
        p_value=change.p_value,
        detector=detector,
        hints=[],
        status="new",
        state="confirmed",
        confirmation={},
    )


def manual_regression(
    session: Session,
    series: Series,
    history: History,
    change: ChangePoint,
    detector: dict[str, Any],
    group: bool = True,
) -> Regression:
    """A step a person placed (``manual``), as detection would record it there.

    ``group``: add it to the session in its alert group, explained; else it stays out of the
    session (the new place of a step being moved, whose fields are copied over).
    """
    regression = _regression(series, history, change, detector)
    if group:
        _group_and_explain(session, [regression])
    return regression


def regressions_of(session: Session, series_id: int) -> list[Regression]:
    """Every finding recorded on the series, oldest first."""
    return _regressions_by_series(session, [series_id])[series_id]


WITHDRAWN_BY = "detection: withdrawn"  # triaged_by of a suspected step that came to nothing


def withdraw(regression: Regression, why: dict[str, Any]) -> None:
    """A suspected step that came to nothing: withdrawn, and ``invalid`` unless triaged.

    ``invalid`` is what every list, group status and notice already reads as "no finding";
    a person's triage stands. ``why`` goes to ``confirmation["withdrawn"]``.
    """
    regression.state = "withdrawn"
    regression.confirmation = {**regression.confirmation, "withdrawn": why}
    if regression.status == "new":
        regression.status, regression.triaged_by = "invalid", WITHDRAWN_BY
        regression.triaged_at = utcnow()


def _confirm(
    regression: Regression,
    series: Series,
    history: History,
    change: ChangePoint,
    found_by: "Finder",
) -> None:
    """A suspected (or withdrawn) step that a detector now finds: its levels are the test's."""
    measured = _regression(series, history, change, found_by.describe())
    for name in ("before", "after", "before_spread", "after_spread", "rel_change", "p_value"):
        setattr(regression, name, getattr(measured, name))
    regression.direction = measured.direction
    regression.detector = measured.detector
    regression.state = "confirmed"
    if regression.triaged_by == WITHDRAWN_BY:  # detection's own verdict, taken back
        regression.status, regression.triaged_by, regression.triaged_at = "new", "", None
    regression.confirmation = {
        **regression.confirmation,
        "confirmed": {
            "run_id": history.run_ids[-1],
            "why": "the change-point test found the step",
            "first_bad_run_id": measured.first_bad_run_id,
        },
    }


@dataclass(frozen=True)
class SeriesScan:
    """One series as this detection pass saw it, for its suspected steps."""

    history: History
    found_at: Sequence[int]  # where the detectors found steps (positions in the history)
    thresholds: Any  # the change-point detector's, for this series
    single_points: bool  # whether the newest point alone may make a step suspected


def _judge_suspects(
    session: Session,
    one: SeriesKey,
    judged: SeriesScan,
    known: list[Regression],
    detection: Detection,
) -> None:
    """Withdraw the series' suspected step if it came to nothing; else suspect a new one.

    A suspected step older than the history read is withdrawn too: the detectors have had
    their points and did not find it.
    """
    history, thresholds = judged.history, judged.thresholds
    position = {run_id: i for i, run_id in enumerate(history.run_ids)}
    newest = history.run_ids[-1]
    for regression in known:
        if regression.state != "suspected":
            continue
        at = position.get(regression.first_bad_run_id)
        if at is None:
            outcome: suspects.SuspicionOutcome | None = (
                "withdrawn",
                "no step found in its history",
            )
        else:
            outcome = suspects.verdict(
                history.values, at, (regression.before, regression.after), judged.found_at
            )
        if outcome is None:
            return  # still suspected: one at a time
        if outcome[0] == "withdrawn":
            withdraw(regression, {"run_id": newest, "why": outcome[1]})
            detection.withdrawn.append(regression)
    standing = [
        at
        for regression in known
        if regression.state != "withdrawn"
        and not regression.is_shape
        and (at := position.get(regression.first_bad_run_id)) is not None
    ]
    since = max(standing, default=0)
    change = suspects.suspect(history.values, since, thresholds, single_point=judged.single_points)
    if change is None:
        return
    if any(
        (at := position.get(r.first_bad_run_id)) is not None
        and abs(at - change.index) <= REFINE_RADIUS
        and not r.is_shape
        for r in known
    ):
        return  # recorded there already (a withdrawn suspicion, or a triaged step)
    series = session.get_one(Series, one.id)
    detector = {
        "name": registry.CHANGE_POINT.name,
        **asdict(thresholds),
        "suspect": asdict(suspects.SuspectConfig()),
    }
    regression = _regression(series, history, change, detector)
    regression.state = "suspected"
    regression.confirmation = {
        "suspected": {"run_id": newest, "points": len(history.run_ids) - change.index}
    }
    known.append(regression)
    detection.suspected.append(regression)
    detection.regressions.append(regression)


# A step's kind, by the one comparison rule's direction (None: the metric has no better way).
KIND_OF = {"better": "improvement", "worse": "regression", None: "change"}


def _direction(metric: Metric, rel_change: float) -> str:
    return KIND_OF[direction(rel_change, metric.higher_is_better)]


def _reverts(
    earlier: Regression, change: ChangePoint, found_by: Finder, position: Mapping[int, int]
) -> bool:
    """A later opposite step that brings the series back to the level before ``earlier``."""
    at = position.get(earlier.first_bad_run_id)
    if earlier.reverted or earlier.status == "invalid" or earlier.state != "confirmed":
        return False
    if earlier.is_shape:
        return False
    if at is not None and at >= change.index:
        return False
    opposite = (earlier.rel_change > 0) != (change.rel_change > 0)
    return opposite and found_by.same_level(earlier.before, change.after)


def _group_and_explain(session: Session, regressions: list[Regression]) -> None:
    runs: grouping.RunCache = {}
    values: dict[int, explain.CaseValues] = {}
    for regression in regressions:
        first_bad, last_good = regression.first_bad_run_id, regression.last_good_run_id
        regression.group, regression.environment_diff = grouping.assign(
            session, runs, first_bad, last_good
        )
        session.add(regression)  # only once grouped: group_id is required
        regression.hints = [
            *regression.hints,
            *explain.regression_hints(session, values, regression),
        ]


def rejudge(
    session: Session,
    series_ids: Sequence[int],
    machine_id: int,
    channel: str,
    thresholds: Thresholds | None = None,
    project: str | None = None,
) -> Detection:
    """Detection again over these series' whole histories, and a machine and channel's runs.

    What a corrected history (an invalidated or deleted run) needs: the steps, failing cases
    and aggregates found as if the run had never come. Bounded by one run's series and one
    machine and channel's runs (those of ``project``, the corrected run's; None: every
    project's, each judged apart), not the whole database.
    """
    read = registry.read_thresholds(thresholds or {})
    series = _series_keys(session, select(Series.id).where(Series.id.in_(list(series_ids))))
    detection = _detect_whole(session, series, read)
    for run, judged in failures.rescan_runs(session, machine_id, channel, project):
        grouping.group_failures(session, judged.opened, run)
        detection.failures += judged.opened
        detection.passing_again += judged.passing_again
    aggregate_findings.rescan_place(session, machine_id, channel, project)
    session.flush()
    return detection
