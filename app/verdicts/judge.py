"""A verdict for one result of a branch's run against the default branch: pure numpy.

The baseline is the default branch's series at the fork point: its points since its last
accepted step (60 at most). The newest ``LEVEL_POINTS`` of them give its level and range;
all of them its noise (the more points, the steadier the estimate, and the lower the z a
step needs for the same rate of false failures). A result is a regression only when it
is worse than the baseline's median by both

- more than the noise: a robust z of at least ``Z`` (the distance over the baseline points'
  noise scale, as the detector measures it), outside the range the baseline points cover
  (a series with two modes has been there before); and, where both sides have enough raw samples
  for the test to decide, a Mann-Whitney test of the result's samples against the
  baseline's at ``MAX_P_VALUE``;
- and at least the series' minimum effect (``DetectorConfig.min_effect``: a few sigmas of its
  noise, within the floor of its metric kind and the fixed 3%).

A series without noise (instruction counts, memory: every baseline point equal) has an
expected value instead, and its minimum effect (the kind's floor) is the margin, as PyTorch's
``pr_time_benchmarks`` does; from an expected 0 (graph breaks, recompiles), any other value
counts. Better by as much is an improvement; a metric with no better
direction is never a regression. Too few baseline points: ``no_baseline``, which never fails.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from app.anomalies.detectors import DetectorConfig, noise_scale, relative_noise
from app.benchmarks.comparison import direction_between, relative_change
from app.core.sample_stats import least_p_value, rank_p_value

Kind = Literal["pass", "regression", "improvement", "no_baseline", "error"]
MIN_POINTS = 3  # baseline points a verdict needs
Z = 5.0  # robust z a result must reach to be told apart from the noise
LEVEL_POINTS = 20  # the newest baseline points give the level and its range (all: the noise)
MAX_P_VALUE = 0.01  # the samples' rank test, where both sides have samples
DEFAULTS = DetectorConfig()


@dataclass(frozen=True)
class ResultVerdict:
    """What one result is, against its baseline."""

    verdict: Kind
    base: float | None = None  # the baseline's median
    rel_change: float | None = None  # (new - base) / |base|
    p_value: float | None = None
    z: float | None = None
    threshold: float | None = None  # the least relative change that counts
    reason: str = ""


def judge(
    new: float | None,
    baseline: Sequence[float],
    higher_is_better: bool | None,
    config: DetectorConfig = DEFAULTS,
    new_samples: Sequence[float] | None = None,
    baseline_samples: Sequence[float] | None = None,
) -> ResultVerdict:
    """The verdict on ``new`` against the baseline points (NaN: failed or missing)."""
    if new is None or not math.isfinite(new):
        return ResultVerdict("error", reason="the result has no value")
    history = np.asarray([v for v in baseline if math.isfinite(v)], dtype=np.float64)
    points = history[-LEVEL_POINTS:]
    if len(points) < MIN_POINTS:
        return ResultVerdict(
            "no_baseline", reason=f"{len(points)} baseline point(s); {MIN_POINTS} needed"
        )
    base = float(np.median(points))
    deterministic = float(np.ptp(points)) == 0.0
    if base == 0:
        return _from_zero(new, deterministic, higher_is_better)
    sigma = noise_scale(history) if len(history) > 1 else 0.0
    least = config.min_effect(0.0 if deterministic else relative_noise(history, sigma))
    rel = relative_change(new, base)
    assert rel is not None, "a zero base was judged above"
    z = abs(new - base) / sigma if sigma > 0 else math.inf
    p_value = _p_value(new_samples, baseline_samples)
    outside = new > float(points.max()) or new < float(points.min())
    beyond = abs(rel) >= least and (deterministic or (z >= Z and outside))
    if p_value is not None and p_value > MAX_P_VALUE:
        beyond = False
    described = _describe(rel, base, z, p_value, least, deterministic)
    if not beyond or higher_is_better is None:
        why = "within the noise" if not beyond else "changed (the metric has no better way)"
        return ResultVerdict("pass", base, rel, p_value, _finite(z), least, f"{why}: {described}")
    worse = direction_between(base, new, higher_is_better) == "worse"
    kind: Kind = "regression" if worse else "improvement"
    return ResultVerdict(kind, base, rel, p_value, _finite(z), least, described)


def _from_zero(new: float, deterministic: bool, higher_is_better: bool | None) -> ResultVerdict:
    """A baseline of exactly 0 (no graph breaks, no recompiles): any other value is a change."""
    if not deterministic:
        return ResultVerdict(
            "no_baseline", base=0.0, reason="the baseline is 0: no relative change"
        )
    if new == 0:
        return ResultVerdict("pass", 0.0, reason="0, as expected")
    reason = f"{new:.4g} where the baseline is 0"
    if higher_is_better is None:
        return ResultVerdict(
            "pass", 0.0, reason=f"changed (the metric has no better way): {reason}"
        )
    worse = direction_between(0.0, new, higher_is_better) == "worse"
    return ResultVerdict("regression" if worse else "improvement", 0.0, reason=reason)


def _p_value(new: Sequence[float] | None, baseline: Sequence[float] | None) -> float | None:
    if not new or not baseline or len(new) < MIN_POINTS or len(baseline) < MIN_POINTS:
        return None
    if least_p_value(len(new), len(baseline)) > MAX_P_VALUE:
        return None  # too few samples for the test ever to agree: it has no say
    return rank_p_value(new, baseline)


def _describe(rel: float, base: float, z: float, p: float | None, least: float, exact: bool) -> str:
    parts = [f"{rel:+.1%} against {base:.4g}"]
    if exact:
        parts.append(f"expected exactly, margin {least:.1%}")
    else:
        parts.append(f"z = {z:.1f} (needs {Z:g}), minimum {least:.1%}")
    if p is not None:
        parts.append(f"samples p = {p:.2g}")
    return "; ".join(parts)


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None
