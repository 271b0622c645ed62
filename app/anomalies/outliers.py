"""The secondary signal: is a run's metric vector unusual as a whole? (IsolationForest).

Each run is summarised by robust z-scores of its values against each series' own history
(median and MAD of the points before it), folded into a few run-level features. An
isolation forest (``core.isolation``) grown on the machine and channel's recent runs then
scores the new run. This flags runs where many series moved a little, which no single step
detector sees; it is shown beside the steps, never used to alert.
"""

from collections.abc import Mapping, Sequence

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.anomalies.history import History
from app.anomalies.models import RunAnomaly
from app.core.isolation import isolate
from app.runs.history import place_runs
from app.runs.models import Run

FEATURES = ("mean_abs_z", "p95_abs_z", "share_over_3", "share_failed")
MIN_HISTORY_RUNS = 10  # fewer runs than this: no score yet
CONTAMINATION = 0.05
# Enough trees that a run's flag is the forest's, not one draw's: with 50, a run just above
# the offset was flagged by one seed and not by another.
TREES = 200
ANOMALY_HISTORY_RUNS = 50  # earlier runs of the place whose features the forest is fitted on


def robust_z(value: float, history: Sequence[float]) -> float | None:
    """(value - median) / (1.4826 MAD) of the history; None when it cannot be told."""
    past = np.asarray(history, dtype=np.float64)
    past = past[np.isfinite(past)]
    if len(past) < 5 or not np.isfinite(value):
        return None
    median = float(np.median(past))
    scale = 1.4826 * float(np.median(np.abs(past - median)))
    if scale == 0:
        scale = max(abs(median) * 1e-3, 1e-12)
    return (value - median) / scale


def run_features(z_scores: Sequence[float], failed: int, total: int) -> dict[str, float]:
    """Run-level features from its series' z-scores and its failure count."""
    absolute = np.abs(np.asarray(z_scores, dtype=np.float64))
    if len(absolute) == 0:
        absolute = np.zeros(1)
    return {
        "mean_abs_z": float(np.mean(np.minimum(absolute, 50.0))),
        "p95_abs_z": float(np.minimum(np.percentile(absolute, 95), 50.0)),
        "share_over_3": float(np.mean(absolute > 3.0)),
        "share_failed": failed / total if total else 0.0,
    }


def score_run(
    features: dict[str, float], history: Sequence[dict[str, float]]
) -> tuple[float, bool] | None:
    """(score, anomalous) of a run against earlier runs' features; None with too few."""
    if len(history) < MIN_HISTORY_RUNS:
        return None
    rows = [[f[name] for name in FEATURES] for f in [*history, features]]
    found = isolate(rows, trees=TREES, contamination=CONTAMINATION)
    score = found.decision(len(rows) - 1)
    return score, score < 0


def record_score(session: Session, run: Run, histories: Mapping[int, History]) -> RunAnomaly:
    """The run's features and score against its place's earlier runs, kept as its ``RunAnomaly``."""
    z_scores, failed, total = [], 0, 0
    for history in histories.values():
        if run.id not in history.run_ids:
            continue
        at = history.run_ids.index(run.id)
        total += 1
        value = history.values[at]
        if value != value:  # NaN: failed or missing
            failed += 1
            continue
        if (z := robust_z(value, history.values[:at])) is not None:
            z_scores.append(z)
    features = run_features(z_scores, failed, total)
    previous = session.scalars(
        place_runs(
            run.machine_id,
            run.channel,
            run.project,
            RunAnomaly.features,
            newest_first=True,
            limit=ANOMALY_HISTORY_RUNS,
        )
        .join(Run, RunAnomaly.run_id == Run.id)
        .where(Run.started_at < run.started_at)
    ).all()
    scored = score_run(features, list(previous))
    anomaly = session.scalar(select(RunAnomaly).where(RunAnomaly.run_id == run.id))
    if anomaly is None:
        anomaly = RunAnomaly(run_id=run.id)
        session.add(anomaly)
    anomaly.features = features
    anomaly.history_runs = len(previous)
    anomaly.score, anomaly.anomalous = scored if scored is not None else (0.0, False)
    return anomaly
