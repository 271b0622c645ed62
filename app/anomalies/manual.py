"""A person corrects the detector: a finding it missed, a step it placed a few runs off.

Both are audited and both are labels: a finding a person created is a real one (what
sensitivity learns from and a backtest scores against), and a moved step keeps its triage.

- ``create``: a step at any run of a series. Its levels are the ``window`` points either
  side (``detectors.step_between``), its direction the metric's; it is ``confirmed`` and
  ``manual`` (``detector["name"]``), joins the alert group of its runs like any finding and
  blocks detection from recording the same step again (``REFINE_RADIUS``).
- ``move``: a step's first bad run, by at most ``REFINE_RADIUS`` points of its series, so that
  the detector finding it again at its own place still matches it. Its levels, last good run
  and environment diff follow the new place; its alert group and triage stay;
  ``confirmation["moved"]`` keeps where it was.
"""

import numpy as np
from sqlalchemy.orm import Session

from app.anomalies import sensitivity, service
from app.anomalies.detectors import REFINE_RADIUS, ChangePoint, DetectorConfig, step_between
from app.anomalies.grouping import environment_diff
from app.anomalies.history import History, load_histories
from app.anomalies.models import Regression
from app.anomalies.triage import REGRESSION, find
from app.audit import service as audit
from app.benchmarks.models import Series
from app.benchmarks.service import SeriesNotFound
from app.core.db import utcnow
from app.core.errors import Conflict, InvalidInput

MANUAL = "manual"  # detector["name"] of a finding a person created
WINDOW = DetectorConfig().window  # points either side that give its levels
AUDITED = (
    "first_bad_run_id",
    "last_good_run_id",
    "direction",
    "before",
    "after",
    "rel_change",
    "status",
    "note",
)


def create(
    session: Session, series_id: int, first_bad_run_id: int, by: str, note: str = ""
) -> Regression:
    """Record a step a person saw at ``first_bad_run_id`` of the series.

    Raises:
        SeriesNotFound: no such series.
        InvalidInput: the run has no point of the series, or no point before it.
        Conflict: a step of the series is recorded within ``REFINE_RADIUS`` points.
    """
    series = session.get(Series, series_id)
    if series is None:
        raise SeriesNotFound(series_id)
    history = _history(session, series_id)
    index = _index(history, first_bad_run_id, "first_bad_run_id")
    _no_step_near(session, series_id, history, index, None)
    change = _step_at(history, index)
    detector = {"name": MANUAL, "by": by[:200]}
    regression = service.manual_regression(session, series, history, change, detector)
    regression.note = note
    regression.confirmation = {"manual": {"by": by[:200], "at": utcnow().isoformat()}}
    session.flush()
    target = f"regression:{regression.id}"
    audit.record(session, by, "regression.create", target, None, audit.fields(regression, AUDITED))
    sensitivity.learn(session, series_id, by)  # a step detection missed is a label
    return regression


def move(session: Session, regression_id: int, first_bad_run_id: int, by: str) -> Regression:
    """Move a step's first bad run to ``first_bad_run_id``, a few points of its series away.

    Raises:
        RegressionNotFound: no such regression.
        InvalidInput: a shape change (it has no level to move), a run with no point of the
            series or none before it, or one over ``REFINE_RADIUS`` points away.
        Conflict: another step of the series is recorded within ``REFINE_RADIUS`` points.
    """
    regression = find(session, REGRESSION, regression_id)
    loc = "first_bad_run_id"
    if regression.is_shape:
        raise _invalid(loc, f"regression {regression_id} is a {regression.direction} change")
    history = _history(session, regression.series_id)
    index = _index(history, first_bad_run_id, loc)
    was = _index(history, regression.first_bad_run_id, loc)
    if abs(index - was) > REFINE_RADIUS:
        message = (
            f"run {first_bad_run_id} is {abs(index - was)} points from the step; "
            f"a step moves by {REFINE_RADIUS} points at most"
        )
        raise _invalid(loc, message)
    _no_step_near(session, regression.series_id, history, index, regression.id)
    before = audit.fields(regression, AUDITED)
    change = _step_at(history, index)
    moved = service.manual_regression(
        session, regression.series, history, change, regression.detector, group=False
    )
    for name in (*AUDITED[:6], "before_spread", "after_spread", "p_value"):
        setattr(regression, name, getattr(moved, name))
    regression.environment_diff = environment_diff(
        session, {}, moved.first_bad_run_id, moved.last_good_run_id
    )
    regression.confirmation = {
        **regression.confirmation,
        "moved": {
            "from_run_id": before["first_bad_run_id"],
            "to_run_id": first_bad_run_id,
            "by": by[:200],
            "at": utcnow().isoformat(),
        },
    }
    session.flush()
    after = audit.fields(regression, AUDITED)
    audit.record(session, by, "regression.move", f"regression:{regression.id}", before, after)
    return regression


def _history(session: Session, series_id: int) -> History:
    found = load_histories(session, [series_id], utcnow(), None)
    return found.get(series_id) or History()


def _index(history: History, run_id: int, loc: str) -> int:
    """The position of the run's point in the history, which must have a point before it."""
    if run_id not in history.run_ids:
        raise _invalid(loc, f"run {run_id} has no result of this series")
    index = history.run_ids.index(run_id)
    if not np.isfinite(history.values[index]):
        raise _invalid(loc, f"run {run_id}'s result of this series failed: it has no level")
    if not any(np.isfinite(v) for v in history.values[:index]):
        raise _invalid(loc, f"run {run_id} is the series' first point: no level before it")
    return index


def _no_step_near(
    session: Session, series_id: int, history: History, index: int, other_than: int | None
) -> None:
    position = {run_id: i for i, run_id in enumerate(history.run_ids)}
    for regression in service.regressions_of(session, series_id):
        at = position.get(regression.first_bad_run_id)
        if regression.id == other_than or regression.is_shape or at is None:
            continue
        if abs(at - index) <= REFINE_RADIUS:
            raise Conflict(
                f"regression {regression.id} of this series starts {abs(at - index)} points "
                f"away; move it, or triage it, instead",
                errors=[{"loc": "first_bad_run_id", "message": "a step is recorded near"}],
            )


def _step_at(history: History, index: int) -> ChangePoint:
    values = np.asarray(history.values, dtype=np.float64)
    left = values[max(0, index - WINDOW) : index]
    right = values[index : index + WINDOW]
    left, right = left[np.isfinite(left)], right[np.isfinite(right)]
    if float(np.median(left)) == 0:
        raise _invalid(
            "first_bad_run_id",
            f"the series' level before run {history.run_ids[index]} is 0: a step is relative to it",
        )
    return step_between(index, left, right)


def _invalid(loc: str, message: str) -> InvalidInput:
    return InvalidInput(message, errors=[{"loc": loc, "message": message}])
