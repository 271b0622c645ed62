"""Sensitivity that learns from triage, within bounds, logged, reversible, or pinned.

Each triaged finding is a label, and a series' labels move its minimum effect.

**Labels.** A step triaged by a person is one: ``fixed``, ``acknowledged``, ``expected``,
``infra``, ``downstream`` and ``duplicate`` say it was real (the data moved, whatever moved
it), ``invalid`` that it was not. A step a person recorded (``manual``) is a real
finding detection *missed*. What detection or a run's correction set by itself
(``triaged_by`` ``detection: ...`` or ``correction: ...``) is no label. A series' record is
its last ``RECENT`` labels, newest first; ``label_shares`` gives the share marked invalid per
series, suite, config or detector over all labels.

**Learning.** With at least ``MIN_LABELS`` labels, a series whose share of invalid labels is
``NOISY_SHARE`` or more gets ``factor = 1 + share`` (at most ``MAX_FACTOR``: 7 of 9 invalid
makes 1.78); one whose record holds a missed step and at most ``QUIET_SHARE`` invalid gets
``MIN_FACTOR``; any other 1. The factor multiplies the change-point detector's minimum effect
on that series: ``min_rel_change``, ``noise_multiple``, ``min_rel_floor`` and
``small_noise_multiple`` (``adjusted``). It is learnt again after each triage of one of the
series' steps and each step recorded on it; every change is written to the audit log
(``sensitivity.learn``) with its reason. A person may turn learning off (the factor is then 1)
or pin thresholds (fields of the change-point detector's, which replace the configured and
learnt ones), both audited (``sensitivity.set``), both undone the same way.
"""

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.anomalies.detectors import DetectorConfig
from app.anomalies.models import Regression, SeriesSensitivity
from app.audit import service as audit
from app.benchmarks.models import Benchmark, CompilerConfig, Series
from app.core.bulk import insert_missing, member_of
from app.core.db import utcnow

RECENT = 10  # labels of a series that its record holds
MIN_LABELS = 4  # fewer, and nothing is learnt
NOISY_SHARE = 0.5  # this share of invalid labels or more makes the series less sensitive
QUIET_SHARE = 0.25  # a missed step and at most this share invalid make it more sensitive
MAX_FACTOR, MIN_FACTOR = 2.0, 0.75  # the bounds of the learnt factor
REAL = ("fixed", "acknowledged", "expected", "infra", "downstream", "duplicate")
AUTOMATIC = ("detection:", "correction:")  # triaged_by of what no person decided
MANUAL = "manual"
SCALED = ("min_rel_change", "noise_multiple", "min_rel_floor", "small_noise_multiple")
PINNABLE = tuple(f.name for f in fields(DetectorConfig))
BY = ("series", "suite", "config", "detector")
SHARE_ROWS = 5000  # the newest findings label_shares reads


@dataclass(frozen=True)
class Record:
    """A series' recent labels: how many, how many invalid, how many missed steps."""

    labels: int = 0
    invalid: int = 0
    missed: int = 0

    @property
    def share(self) -> float:
        """The share of its labels marked invalid (0 without labels)."""
        return self.invalid / self.labels if self.labels else 0.0

    def words(self) -> str:
        """``7 of the last 9 findings on this series were invalid`` (empty without labels)."""
        if not self.labels:
            return ""
        text = f"{self.invalid} of the last {self.labels} findings on this series were invalid"
        if self.missed:
            text += f"; {self.missed} {'was a step' if self.missed == 1 else 'were steps'}"
            text += " detection missed"
        return text

    def factor(self) -> tuple[float, str]:
        """The factor these labels make, and why."""
        if self.labels < MIN_LABELS:
            return 1.0, f"{self.labels} labels: under {MIN_LABELS}, nothing learnt"
        if self.share >= NOISY_SHARE:
            return min(MAX_FACTOR, 1.0 + self.share), self.words()
        if self.missed and self.share <= QUIET_SHARE:
            return MIN_FACTOR, self.words()
        return 1.0, self.words()


def label_of(status: str, triaged_by: str, detector: Mapping[str, Any]) -> str | None:
    """``real``, ``invalid``, ``missed`` (a step a person recorded), or None (no label)."""
    if detector.get("name") == MANUAL:
        return "missed"
    if status == "new" or triaged_by.startswith(AUTOMATIC):
        return None
    return "invalid" if status == "invalid" else "real"


LABEL_COLUMNS = (Regression.status, Regression.triaged_by, Regression.detector)


def records(session: Session, series_ids: Sequence[int]) -> dict[int, Record]:
    """Each series' record of its last ``RECENT`` labels (one query per chunk of ids)."""
    labels: dict[int, list[str]] = defaultdict(list)
    for condition in member_of(session, Regression.series_id, sorted(set(series_ids))):
        query = (
            select(Regression.series_id, *LABEL_COLUMNS)
            .where(condition)
            .order_by(Regression.series_id, Regression.triaged_at.desc(), Regression.id.desc())
        )
        for series_id, *row in session.execute(query):
            label = label_of(*row)
            if label is not None and len(labels[series_id]) < RECENT:
                labels[series_id].append(label)
    return {
        series_id: Record(
            labels=len(found),
            invalid=found.count("invalid"),
            missed=found.count("missed"),
        )
        for series_id, found in labels.items()
    }


def record_of(session: Session, series_id: int) -> Record:
    """One series' record."""
    return records(session, [series_id]).get(series_id, Record())


def settings_of(session: Session, series_ids: Sequence[int]) -> dict[int, SeriesSensitivity]:
    """The stored sensitivity of those series that have one."""
    found: dict[int, SeriesSensitivity] = {}
    for condition in member_of(session, SeriesSensitivity.series_id, sorted(set(series_ids))):
        for row in session.scalars(select(SeriesSensitivity).where(condition)):
            found[row.series_id] = row
    return found


def adjusted(config: DetectorConfig, setting: SeriesSensitivity | None) -> DetectorConfig:
    """The change-point thresholds on a series with this sensitivity (None: as configured)."""
    if setting is None:
        return config
    if setting.pinned:
        return replace(config, **_typed(setting.pinned))
    if not setting.learning or setting.factor == 1.0:
        return config
    scaled = {name: getattr(config, name) * setting.factor for name in SCALED}
    return replace(config, **scaled)


def _typed(pinned: Mapping[str, float]) -> dict[str, Any]:
    whole = {"min_segment", "window", "small_points"}
    return {k: int(v) if k in whole else float(v) for k, v in pinned.items() if k in PINNABLE}


def learn(session: Session, series_id: int, by: str) -> SeriesSensitivity | None:
    """Learn the series' factor again from its record; audited when it changes."""
    setting = session.get(SeriesSensitivity, series_id)
    if setting is not None and not setting.learning:
        return setting
    factor, reason = record_of(session, series_id).factor()
    was = 1.0 if setting is None else setting.factor
    if setting is None and factor == 1.0:
        return None
    if setting is None:
        setting = _row(session, series_id)
        was = setting.factor
    if factor == was:  # the same factor: its reason follows the record, not logged again
        setting.reason = reason
        return setting
    before = {"factor": was, "reason": setting.reason}
    setting.factor, setting.reason = factor, reason
    setting.updated_by, setting.updated_at = by[:200], utcnow()
    audit.record(session, by, "sensitivity.learn", f"series:{series_id}", before, _audited(setting))
    return setting


def set_by_person(
    session: Session,
    series_id: int,
    by: str,
    learning: bool | None = None,
    pinned: Mapping[str, float] | None = None,
    unpin: bool = False,
) -> SeriesSensitivity:
    """A person turns learning on or off, pins thresholds or unpins them; audited."""
    setting = _row(session, series_id)
    before = _audited(setting)
    if learning is not None:
        setting.learning = learning
    if pinned is not None:
        setting.pinned = dict(pinned)
    if unpin:
        setting.pinned = None
    setting.updated_by, setting.updated_at = by[:200], utcnow()
    if not setting.learning:
        setting.factor, setting.reason = 1.0, "learning turned off"
    audit.record(session, by, "sensitivity.set", f"series:{series_id}", before, _audited(setting))
    session.flush()
    if setting.learning and learning:
        learn(session, series_id, by)
    return setting


def _row(session: Session, series_id: int) -> SeriesSensitivity:
    """The series' row, made at x1 when it has none, and locked (Postgres) for this change.

    Made by an insert that skips an existing row: two triagers of the same series at once
    must not both insert it (the second would fail on the key).
    """
    fresh = {"factor": 1.0, "learning": True, "reason": "", "updated_by": ""}
    insert_missing(
        session,
        SeriesSensitivity,
        [{"series_id": series_id, **fresh, "updated_at": utcnow()}],
        ["series_id"],
    )
    return session.get_one(
        SeriesSensitivity, series_id, with_for_update=True, populate_existing=True
    )


def _audited(setting: SeriesSensitivity) -> dict[str, Any]:
    return audit.fields(setting, ("factor", "learning", "pinned", "reason"))


def label_shares(session: Session, by: str) -> list[dict[str, Any]]:
    """The labels and the share marked invalid per ``by`` (series, suite, config, detector).

    Over the newest ``SHARE_ROWS`` findings (those that are labels among them): bounded,
    whoever asks.
    """
    query = (
        select(Regression.series_id, Benchmark.suite, CompilerConfig.name, *LABEL_COLUMNS)
        .join(Series, Regression.series_id == Series.id)
        .join(Benchmark, Series.benchmark_id == Benchmark.id)
        .join(CompilerConfig, Benchmark.compiler_config_id == CompilerConfig.id)
        .order_by(Regression.id.desc())
        .limit(SHARE_ROWS)
    )
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for series_id, suite, config, status, triaged_by, detector in session.execute(query):
        label = label_of(status, triaged_by, detector)
        if label is None:
            continue
        key = {
            "series": str(series_id),
            "suite": suite,
            "config": config,
            "detector": str(detector.get("name", "")),
        }[by]
        tally = counts[key]
        tally[0] += 1
        tally[1] += label == "invalid"
        tally[2] += label == "missed"
    return [
        {
            "key": key,
            "labels": labels,
            "invalid": invalid,
            "missed": missed,
            "invalid_share": invalid / labels,
        }
        for key, (labels, invalid, missed) in sorted(counts.items())
    ]


def describe(session: Session, series: Series, configured: DetectorConfig) -> dict[str, Any]:
    """A series' sensitivity as the API shows it: record, setting, thresholds in use."""
    record = record_of(session, series.id)
    setting = session.get(SeriesSensitivity, series.id)
    return {
        "series_id": series.id,
        "record": {
            "labels": record.labels,
            "invalid": record.invalid,
            "missed": record.missed,
            "invalid_share": record.share,
            "words": record.words(),
        },
        "factor": setting.factor if setting else 1.0,
        "learning": setting.learning if setting else True,
        "pinned": setting.pinned if setting else None,
        "reason": setting.reason if setting else "",
        "updated_by": setting.updated_by if setting else "",
        "updated_at": setting.updated_at if setting else None,
        "thresholds": asdict(adjusted(configured, setting)),
    }
