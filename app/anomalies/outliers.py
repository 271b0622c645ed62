"""The secondary signal: is a run's metric vector unusual as a whole? (IsolationForest).

Each run is summarised by robust z-scores of its values against each series' own history
(median and MAD of the points before it), folded into a few run-level features. An
IsolationForest (Liu, Ting & Zhou 2008) fitted on the machine and channel's recent runs then
scores the new run. This flags runs where many series moved a little, which no single
step detector sees; it is shown beside the steps, never used to alert.
"""

from collections.abc import Sequence

import numpy as np
from sklearn.ensemble import IsolationForest

FEATURES = ("mean_abs_z", "p95_abs_z", "share_over_3", "share_failed")
MIN_HISTORY_RUNS = 10  # fewer runs than this: no score yet
CONTAMINATION = 0.05


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
    rows = np.asarray([[f[name] for name in FEATURES] for f in [*history, features]])
    forest = IsolationForest(n_estimators=50, contamination=CONTAMINATION, random_state=0)
    forest.fit(rows)
    last = rows[-1:]
    return float(forest.decision_function(last)[0]), bool(forest.predict(last)[0] == -1)
