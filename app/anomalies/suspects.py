"""Suspected steps: the newest points of a series left its level by far more than its noise.

The change-point detector (``detectors``) needs ``min_segment`` points of a new level before
it judges a step: two and a half days at 12-hourly runs. A step large against the series'
noise is plain much sooner, so the newest points are judged on their own, against the level
before them (the ``reference`` points since the last recorded step; where that level is
new, under ``min_reference`` points, its noise is taken from the points before the newest
however far back, so that a step soon after a step is judged against the spread of its own
level, not against the swing of the step before it):

- the newest ``points`` (2) all lie beyond ``z`` robust sigmas of that level and at least
  its minimum effect (``DetectorConfig.min_effect``) away, on the same side, and further
  from it than ``spread`` times the widest deviation among the reference points (a bimodal
  series has been there before);
- or the newest point alone does, by ``first_point_z`` sigmas and by ``first_point_spread``
  times the widest deviation among the reference points, a margin no noise in them reaches
  (a crash of throughput, a doubled memory peak); heavy-tailed noise makes the sigma of a
  few points an unsafe yardstick for one point, its widest deviation less so.

A suspected step then waits for the detector: it is ``confirmed`` when the change-point test
finds a step within ``REFINE_RADIUS`` points of it, and ``withdrawn`` when the newest point is
back near the level before (nearer than half the suspected change) or when
``withdraw_after`` points have passed without the test agreeing.

Pure numpy, like ``detectors``: the service keeps the state, ``bench/sooner.py`` measures it.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from app.anomalies.detectors import (
    REFINE_RADIUS,
    ChangePoint,
    DetectorConfig,
    noise_scale,
    relative_noise,
    step_between,
)

SuspicionOutcome = tuple[Literal["confirmed", "withdrawn"], str]  # and why, in words


@dataclass(frozen=True)
class SuspectConfig:
    """When the newest points make a step suspected, and how long it may stay so."""

    points: int = 2  # newest points that must all have left the level
    z: float = 6.0  # ... by this many robust sigmas of the level before
    spread: float = 1.25  # ... and this many times the reference's widest deviation
    first_point_z: float = 15.0  # or the newest one alone, by this many
    first_point_spread: float = 3.0  # ... and this many times the reference's widest deviation
    reference: int = 40  # points before them that give the level and its noise
    min_reference: int = 15  # fewer, and the level's noise is taken from the points before it
    min_level: int = 4  # fewer points since the last step, and nothing is suspected
    withdraw_after: int = 8  # points from the suspected start without the test agreeing


DEFAULT_DETECTOR, DEFAULT_SUSPECT = DetectorConfig(), SuspectConfig()


def suspect(
    values: npt.ArrayLike,
    since: int = 0,
    config: DetectorConfig = DEFAULT_DETECTOR,
    suspect_config: SuspectConfig = DEFAULT_SUSPECT,
    single_point: bool = True,
) -> ChangePoint | None:
    """The step the newest points suggest, if they suggest one (``index``: its first point).

    Args:
        values: the series in time order; NaN marks a missing or failed point.
        since: the first index of the current level (after the last recorded step): the
            reference points are taken from there on only.
        config: the detector's thresholds (its minimum effect applies here too).
        suspect_config: how far and how many.
        single_point: whether the newest point alone may do (not when its whole run is odd).
    """
    series = np.asarray(values, dtype=np.float64)
    everything = np.flatnonzero(np.isfinite(series))
    rules = [(suspect_config.points, suspect_config.z, suspect_config.spread)]
    if single_point:
        rules.append((1, suspect_config.first_point_z, suspect_config.first_point_spread))
    for count, z, spread in rules:
        rule = Rule(count, z, spread)
        found = _judge_tail(series, everything, since, rule, config, suspect_config)
        if found is not None:
            return found
    return None


@dataclass(frozen=True)
class Rule:
    """How many newest points, and how far: ``z`` sigmas and ``spread`` widest deviations."""

    count: int
    z: float
    spread: float


def _judge_tail(
    series: npt.NDArray[np.float64],
    everything: npt.NDArray[np.intp],
    since: int,
    rule: Rule,
    config: DetectorConfig,
    suspect_config: SuspectConfig,
) -> ChangePoint | None:
    """The step the newest ``rule.count`` points make, if they are far enough from the level.

    Far enough: beyond ``z`` sigmas, the minimum effect, and ``spread`` times the widest
    deviation of the reference points (1: just outside the range they cover). The level and
    its widest deviation come from the reference points of the current level (from
    ``since``); its noise too, unless that level is new (under ``min_reference`` points but
    at least ``min_level`` of them): then the noise is the one of the points before the tail
    however far back, which a step among them barely moves (``noise_scale`` takes the point
    to point differences). A step soon after a step is judged against its own level's
    spread that way, not against the swing of the step before it.
    """
    count = rule.count
    if len(everything) < suspect_config.min_reference + count:
        return None
    tail = series[everything[-count:]]
    wide = series[everything[-count - suspect_config.reference : -count]]
    current = everything[everything >= since]
    reference = series[current[-count - suspect_config.reference : -count]]
    if len(current) < count + suspect_config.min_reference:
        if len(current) < count + suspect_config.min_level:
            return None
        sigma = noise_scale(wide)
    else:
        sigma = noise_scale(reference)
    level = float(np.median(reference))
    if level == 0:
        return None
    least = config.min_effect(relative_noise(reference, sigma))
    widest = rule.spread * float(np.max(np.abs(reference - level)))
    margin = max(rule.z * sigma, least * abs(level), widest)
    above = bool(np.all(tail > level + margin))
    below = bool(np.all(tail < level - margin))
    if not (above or below):
        return None
    # Its rank test's p-value, with so few points, is never small: kept as the evidence so far.
    return step_between(int(everything[-count]), reference, tail)


def verdict(
    values: npt.ArrayLike,
    start: int,
    levels: tuple[float, float],
    confirmed_at: Sequence[int],
    suspect_config: SuspectConfig = DEFAULT_SUSPECT,
) -> SuspicionOutcome | None:
    """What became of a suspected step, with the series as it is now (None: still suspected).

    Args:
        values: the series in time order (NaN: missing).
        start: the suspected step's first point, as an index into ``values``.
        levels: the levels before and after the step, as it was suspected.
        confirmed_at: the first points of the steps the change-point detector finds now.
        suspect_config: when to give up waiting.
    """
    if any(abs(at - start) <= REFINE_RADIUS for at in confirmed_at):
        return "confirmed", "the change-point test found the step"
    series = np.asarray(values, dtype=np.float64)
    since = series[start:]
    since = since[np.isfinite(since)]
    if len(since) == 0:
        return None
    before, after = levels
    if abs(float(since[-1]) - before) < abs(after - before) / 2:
        return "withdrawn", "the newest point is back near the level before"
    if len(since) >= suspect_config.withdraw_after:
        return "withdrawn", f"the change-point test did not find it in {len(since)} points"
    return None
