"""Good, bad or unknown: a probe's samples judged against the good and bad references.

A probe is measured between two references: the last good environment and the first bad
one, re-measured side by side. Its judgement combines two facts, as Pinpoint does:

- a rank test: the probe's samples against each reference's, by the project's Mann-Whitney
  U test (``detectors.step_between``), at ``MAX_P_VALUE``;
- the size of the change relative to the step: the probe's median placed on the line from
  the good median (position 0) to the bad one (position 1).

The rule: good when the probe differs from the bad reference and sits at or below
``GOOD_BELOW`` (an overshoot past the good level included); bad when it differs from the
good reference and sits at or above ``BAD_ABOVE``; half-way when it differs from both and
sits between; unknown otherwise, where more samples may tell. Neither fact is enough on its
own: a test with many samples finds a small drift of a reference, and a median of few
samples strays; a probe is called a side only when it both differs from the other and sits
near its own.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from app.anomalies.detectors import DetectorConfig, step_between, within_run_noise
from app.benchmarks.comparison import direction

Decision = Literal["good", "bad", "halfway", "unknown"]
# Chromeperf's pinpoint and the project's detection both confirm a step at p <= 0.001; a
# probe is judged up to five times (``SCHEDULE``), so a wrong side stays well under 1%.
MAX_P_VALUE = 0.001
GOOD_BELOW = 0.25  # position (0 good, 1 bad) under which a probe unlike both is good
BAD_ABOVE = 0.75
# The samples a probe has after each round: Pinpoint grows from 10 to 160 attempts.
SCHEDULE = (10, 20, 40, 80, 160)
# What counts as reproduced: the project's minimum effect for a timing (3 sigmas of the
# samples' noise, a 0.5% floor, never over 3%), the detector's own rule.
REPRODUCED = DetectorConfig()


@dataclass(frozen=True)
class Summary:
    """What a decision keeps of one side's samples."""

    count: int
    median: float
    spread: float  # median absolute deviation over the median (0 when it is 0)

    @classmethod
    def of(cls, samples: Sequence[float]) -> "Summary":
        """The summary of some samples (at least one)."""
        median = float(np.median(np.asarray(samples, dtype=np.float64)))
        return cls(len(samples), median, within_run_noise(samples) or 0.0)


@dataclass(frozen=True)
class Judgement:
    """One decision on a probe, with the figures it rests on."""

    decision: Decision
    position: float  # the probe's median on the good (0) to bad (1) line
    p_good: float  # rank test, probe against the good reference
    p_bad: float
    effect: float  # the probe's median change relative to the good median
    probe: Summary
    good: Summary
    bad: Summary
    reason: str


def judge_probe(probe: Sequence[float], good: Sequence[float], bad: Sequence[float]) -> Judgement:
    """Judge a probe's samples against the good and bad references' (see the module)."""
    x, g, b = (np.asarray(s, dtype=np.float64) for s in (probe, good, bad))
    to_good, to_bad = step_between(0, g, x), step_between(0, b, x)
    good_median, bad_median, median = to_good.before, to_bad.before, to_good.after
    step = bad_median - good_median
    position = (median - good_median) / step if step else 0.0
    unlike_good, unlike_bad = to_good.p_value <= MAX_P_VALUE, to_bad.p_value <= MAX_P_VALUE
    decision: Decision = "unknown"
    if unlike_bad and position <= GOOD_BELOW:
        decision = "good"
    elif unlike_good and position >= BAD_ABOVE:
        decision = "bad"
    elif unlike_good and unlike_bad:
        decision = "halfway"
    effect = (median - good_median) / abs(good_median) if good_median else 0.0
    reason = (
        f"{decision}: at {position:.2f} of the step, {effect:+.1%} against good; "
        f"p = {to_good.p_value:.2g} against good, {to_bad.p_value:.2g} against bad "
        f"({len(x)} samples)"
    )
    return Judgement(
        decision,
        position,
        to_good.p_value,
        to_bad.p_value,
        effect,
        Summary.of(probe),
        Summary.of(good),
        Summary.of(bad),
        reason,
    )


@dataclass(frozen=True)
class Reproduction:
    """The pre-flight's verdict: do the good and bad references differ, the bad way?"""

    reproduced: bool
    p_value: float
    rel_change: float  # bad's median against good's
    least: float  # the least relative change that counts as reproduced
    good: Summary
    bad: Summary
    reason: str


def reproduces(
    good: Sequence[float], bad: Sequence[float], higher_is_better: bool | None
) -> Reproduction:
    """Whether the bad reference is worse than the good one, by the test and the size.

    Reproduced: the rank test separates them (``MAX_P_VALUE``), the change is at least the
    project's minimum effect for the samples' noise, and it goes the worse way (either way
    for a metric with no better direction).
    """
    g, b = np.asarray(good, dtype=np.float64), np.asarray(bad, dtype=np.float64)
    step = step_between(0, g, b)
    noise = max(within_run_noise(good) or 0.0, within_run_noise(bad) or 0.0)
    least = REPRODUCED.min_effect(noise)
    way = direction(step.rel_change, higher_is_better)
    figures = (
        f"good {step.before:.4g} ({len(g)} samples), bad {step.after:.4g} ({len(b)} samples): "
        f"{step.rel_change:+.1%}, p = {step.p_value:.2g}, least {least:.1%}"
    )
    if step.p_value > MAX_P_VALUE or abs(step.rel_change) < least:
        return Reproduction(
            False,
            step.p_value,
            step.rel_change,
            least,
            Summary.of(good),
            Summary.of(bad),
            f"not reproduced: {figures}",
        )
    if higher_is_better is not None and way != "worse":
        return Reproduction(
            False,
            step.p_value,
            step.rel_change,
            least,
            Summary.of(good),
            Summary.of(bad),
            f"not reproduced: the bad side measures better ({figures})",
        )
    return Reproduction(
        True,
        step.p_value,
        step.rel_change,
        least,
        Summary.of(good),
        Summary.of(bad),
        f"reproduced: {figures}",
    )
