"""Backtest thresholds before they are set: would-be findings against stored ones, triaged.

As Skia's dry run and chromeperf's debug alert do.

**What is replayed.** The series a selection names (machine, channel, suite, model, config,
metric, project: each optional), at most ``MAX_SERIES`` of them and their newest
``MAX_POINTS`` points each, so that no request costs more than a few seconds. Each is judged
whole by the change-point detector with the proposed thresholds (a mapping shaped like
``BENCHWATCH_DETECTOR_THRESHOLDS``, over the configured one: the proposal's keys win), and
the series' own sensitivity (``sensitivity.adjusted``) as detection would use it.

**What it is scored against.** The steps stored on those series (not shape changes, not
withdrawn suspicions): a step found within ``REFINE_RADIUS`` points of a stored one *keeps*
it, a stored one the proposal does not find is *removed*, a step the proposal finds where
none is stored is *added*. Each stored step carries its triage label
(``sensitivity.label_of``): precision is real labels over real and invalid ones, for what is
stored now and for what the proposal keeps; a *missed* label (a step a person recorded) the
proposal finds counts as recovered.

A subscription's rules are replayed by ``notifications.replay``, with this module's tallies.

Evidence apart from history: a backtest reads, and writes nothing.
"""

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.anomalies import registry, sensitivity
from app.anomalies.detectors import REFINE_RADIUS, find_change_points
from app.anomalies.history import History, load_histories
from app.anomalies.models import Regression
from app.benchmarks.models import Series
from app.benchmarks.service import SeriesFilter, search_series
from app.core.db import utcnow

MAX_SERIES = 200  # series one backtest replays
MAX_POINTS = 500  # newest points of each
MAX_ITEMS = 200  # findings listed one by one


@dataclass
class Tally:
    """Findings and their labels on one side of a backtest."""

    findings: int = 0
    real: int = 0
    invalid: int = 0
    missed: int = 0

    @property
    def precision(self) -> float | None:
        """Real labels over real and invalid ones (None without either)."""
        judged = self.real + self.invalid
        return self.real / judged if judged else None

    def count(self, label: str | None) -> None:
        """One more finding, with its label."""
        self.findings += 1
        if label in ("real", "invalid", "missed"):
            setattr(self, label, getattr(self, label) + 1)


@dataclass
class Report:
    """A backtest's outcome: both sides' tallies, what moved, and the findings one by one."""

    series: int = 0
    points: int = 0
    now: Tally = field(default_factory=Tally)
    proposed: Tally = field(default_factory=Tally)
    kept: int = 0
    added: int = 0
    removed: int = 0
    items: list[dict[str, Any]] = field(default_factory=list)
    truncated: bool = False

    def as_dict(self) -> dict[str, Any]:
        """The report as the API returns it."""
        sides = {
            name: {**asdict(tally), "precision": tally.precision}
            for name, tally in (("now", self.now), ("proposed", self.proposed))
        }
        return {
            "series": self.series,
            "points": self.points,
            **sides,
            "kept": self.kept,
            "added": self.added,
            "removed": self.removed,
            "items": self.items,
            "truncated": self.truncated,
        }


def backtest(
    session: Session,
    proposed: Mapping[str, Mapping[str, float]],
    configured: Mapping[str, Mapping[str, float]],
    where: SeriesFilter,
) -> Report:
    """Replay the proposed thresholds over the selected series' stored history.

    Raises:
        ValueError: a key or field of ``proposed`` no detector knows (the message says which).
    """
    thresholds = registry.read_thresholds({**configured, **proposed})
    chosen, total = search_series(session, where, 0, MAX_SERIES)
    report = Report(series=len(chosen), truncated=total > len(chosen))
    ids = [s.id for s in chosen]
    histories = load_histories(session, ids, utcnow(), MAX_POINTS)
    tuned = sensitivity.settings_of(session, ids)
    stored = _stored_steps(session, ids)
    for series in chosen:
        history = histories.get(series.id)
        if history is None:
            continue
        report.points += len(history.values)
        metric = series.metric
        config = thresholds.for_series(
            registry.CHANGE_POINT, series.benchmark.suite, metric.name, metric.kind
        )
        config = sensitivity.adjusted(config, tuned.get(series.id))
        found = [c.index for c in find_change_points(history.values, config)]
        _compare(report, series, history, found, stored.get(series.id, []))
    return report


def _stored_steps(session: Session, series_ids: Sequence[int]) -> dict[int, list[Regression]]:
    found: dict[int, list[Regression]] = {}
    if not series_ids:
        return found
    query = (
        select(Regression)
        .where(Regression.series_id.in_(series_ids), Regression.state != "withdrawn")
        .order_by(Regression.id)
    )
    for regression in session.scalars(query):
        if not regression.is_shape:
            found.setdefault(regression.series_id, []).append(regression)
    return found


def _compare(
    report: Report,
    series: Series,
    history: History,
    found: list[int],
    stored: list[Regression],
) -> None:
    """Match the proposal's steps to the stored ones within ``REFINE_RADIUS`` points."""
    position = {run_id: i for i, run_id in enumerate(history.run_ids)}
    unmatched = list(found)
    for regression in stored:
        at = position.get(regression.first_bad_run_id)
        label = sensitivity.label_of(regression.status, regression.triaged_by, regression.detector)
        report.now.count(label)
        near = [i for i in unmatched if at is not None and abs(i - at) <= REFINE_RADIUS]
        if near:
            unmatched.remove(min(near, key=lambda i: abs(i - (at or 0))))
            report.kept += 1
            report.proposed.count(label)
            continue
        report.removed += 1
        _item(report, series, regression.first_bad_run_id, "removed", label, regression.id)
    for index in unmatched:
        report.added += 1
        report.proposed.count(None)
        _item(report, series, history.run_ids[index], "added", None, None)


def _item(
    report: Report,
    series: Series,
    first_bad_run_id: int,
    change: str,
    label: str | None,
    regression_id: int | None,
) -> None:
    if len(report.items) >= MAX_ITEMS:
        report.truncated = True
        return
    benchmark = series.benchmark
    report.items.append(
        {
            "change": change,
            "series_id": series.id,
            "case": f"{benchmark.model} · {benchmark.config} · {benchmark.precision}",
            "metric": series.metric.name,
            "machine": series.machine.name,
            "first_bad_run_id": first_bad_run_id,
            "regression_id": regression_id,
            "label": label or "",
        }
    )
