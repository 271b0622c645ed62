"""Detection sooner and finer: suspected steps, and a minimum effect that follows the noise.

Two measurements of ``app.anomalies`` on seeded synthetic series (``bench/detection.py``'s
generator, so ``make_series(seed, i)`` rebuilds any series of the first part):

**1. Suspected steps.** Each series of the detection corpus (``uniform`` step mix) is walked
point by point, as runs arrive: at each new point the change-point detector judges the last
60 points (``service.INCREMENTAL_POINTS``) and records the steps it confirms; when no
suspected step is open, ``suspects.suspect`` judges the newest points against the level since
the last recorded step, and an open one is judged by ``suspects.verdict`` (confirmed when the
detector places a step near it, withdrawn when the series comes back or the test does not
agree in time). A report is *correct* when it lies within 2 points of a true step not
already reported; the delay of a true step is the points of its new level seen when it is
first reported (1: at its first point), by the suspected state or, without it, by the
detector alone ("today"). Printed: precision of suspected reports, how many were confirmed
or withdrawn, and the median delay by step size, today against with suspected steps.

**2. Small steps on quiet series.** A corpus per noise level (coefficient of variation in
0.1-0.2%, 0.2-0.5%, 0.5-1%, 1-3%): half the series hold one step of 3 to 6 times the noise,
the others none (constant, isolated outliers of 3-10 sigma, a 2-6% drift over the series,
or two modes 3-6% apart), Gaussian or heavy-tailed noise as in the detection corpus. The
detector with today's fixed 3% minimum effect (``DetectorConfig(min_rel_floor=0.03)``)
against the default, whose minimum effect is 3 sigmas of the series' noise with a 0.5%
floor (a timing's; memory and counts have lower floors, see ``registry``). Printed per noise
level: recall of the steps, and false alarms per 1,000 points of the step-free series.

Run ``.venv/bin/python bench/sooner.py [--quick] [--seed N]`` from the repository root.
"""

import argparse
import math
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from app.anomalies.detectors import (  # noqa: E402
    REFINE_RADIUS,
    ChangePoint,
    DetectorConfig,
    find_change_points,
)
from app.anomalies.suspects import suspect, verdict  # noqa: E402
from bench.corpus import (  # noqa: E402
    STEP_BUCKETS,
    TOLERANCE,
    Series,
    bucket_name,
    isolated_points,
    make_corpus,
    noise,
    num,
    pct,
    print_rows,
    ratio,
)

WINDOW = 60  # service.INCREMENTAL_POINTS: the history one run's detection reads
FIRST_POINT = 10  # points before the walk starts reporting
TARGET_PRECISION = 0.8
TARGET_DELAY = 2.0  # median points to the first report, steps >= 10%
BIG_STEP = 0.10

QUIET_BUCKETS = ((0.001, 0.002), (0.002, 0.005), (0.005, 0.01), (0.01, 0.03))
QUIET_CATEGORIES = ("step", "no_change", "outliers", "drift", "bimodal")
QUIET_P = (0.5, 0.125, 0.125, 0.125, 0.125)
QUIET_LENGTHS = (60, 200)
SNR = (3.0, 6.0)  # step size in noise CVs
TODAY = DetectorConfig(min_rel_floor=0.03)  # the fixed 3% minimum effect
DEFAULT = DetectorConfig()


# --- 1. suspected steps -----------------------------------------------------------------------


@dataclass
class Report:
    """One report of a step: suspected (and what became of it), or confirmed at once."""

    index: int  # where the step starts, as reported
    at: int  # the point at which it was reported
    suspected: bool
    outcome: str = "open"  # confirmed | withdrawn | open (the series ended first)


@dataclass
class Walk:
    """What the walk of one series reported, and when the detector alone would have."""

    series: Series
    reports: list[Report] = field(default_factory=list)
    recorded: dict[int, int] = field(default_factory=dict)  # step index -> point recorded at


def walk(series: Series, config: DetectorConfig = DEFAULT) -> Walk:
    """Judge the series point by point, as detection does after each run."""
    values = series.values
    result = Walk(series)
    open_: tuple[Report, ChangePoint] | None = None
    for t in range(FIRST_POINT, len(values)):
        start = max(0, t + 1 - WINDOW)
        found = [start + cp.index for cp in find_change_points(values[start : t + 1], config)]
        for index in found:
            if all(abs(index - known) > REFINE_RADIUS for known in result.recorded):
                result.recorded[index] = t
        if open_ is not None:
            report, suspected = open_
            outcome = verdict(
                values[: t + 1], report.index, (suspected.before, suspected.after), found
            )
            if outcome is not None:
                report.outcome = outcome[0]
                open_ = None
            continue
        since = max(result.recorded, default=0)
        candidate = suspect(values[: t + 1], since, config)
        if candidate is not None and all(
            abs(candidate.index - known) > REFINE_RADIUS for known in result.recorded
        ):
            report = Report(candidate.index, t, suspected=True)
            result.reports.append(report)
            open_ = (report, candidate)
    return result


def first_reports(result: Walk, with_suspects: bool) -> list[int | None]:
    """Per true step: the delay (points of its new level seen) of its first report."""
    delays: list[int | None] = []
    for at in result.series.steps:
        times = [
            t for index, t in result.recorded.items() if abs(index - at) <= TOLERANCE and t >= at
        ]
        if with_suspects:
            times += [r.at for r in result.reports if abs(r.index - at) <= TOLERANCE]
        delays.append(min(times) - at + 1 if times else None)
    return delays


def correct_suspects(result: Walk) -> int:
    """Suspected reports within ``TOLERANCE`` of a true step, each step counted once."""
    used: set[int] = set()
    correct = 0
    for report in result.reports:
        near = [
            k for k, at in enumerate(result.series.steps) if abs(report.index - at) <= TOLERANCE
        ]
        fresh = [k for k in near if k not in used]
        if fresh:
            used.add(fresh[0])
            correct += 1
    return correct


def print_suspected(walks: list[Walk], seconds: float) -> None:
    """Precision of suspected reports, their outcomes, and delays by step size."""
    reports = [r for w in walks for r in w.reports]
    correct = sum(correct_suspects(w) for w in walks)
    outcomes = {
        name: sum(r.outcome == name for r in reports) for name in ("confirmed", "withdrawn", "open")
    }
    first = sum(r.at == r.index for r in reports)
    precision = ratio(correct, len(reports))
    print(
        f"\n=== suspected steps ({len(walks)} series walked point by point, {seconds:.0f} s) ===\n"
    )
    print(
        f"  suspected reports {len(reports)} ({first} from the first bad point alone),"
        f" correct {correct}: precision {num(precision)}; {outcomes}"
    )
    header = [
        "step size [true steps]",
        "found today",
        "found",
        "median delay today",
        "median delay",
        "max delay",
    ]
    rows = []
    big_delays: list[int] = []
    for bucket in (*STEP_BUCKETS, (BIG_STEP, math.inf)):
        today: list[int] = []
        sooner: list[int] = []
        total = 0
        for w in walks:
            plain, early = first_reports(w, False), first_reports(w, True)
            for k, size in enumerate(w.series.sizes):
                if not (bucket[0] <= abs(size) < bucket[1]):
                    continue
                total += 1
                if plain[k] is not None:
                    today.append(plain[k])  # type: ignore[arg-type]
                if early[k] is not None:
                    sooner.append(early[k])  # type: ignore[arg-type]
        name = f">= {100 * BIG_STEP:g}%" if bucket[1] == math.inf else bucket_name(bucket)
        if bucket[1] == math.inf:
            big_delays = sooner
        rows.append(
            [
                f"{name} [{total}]",
                pct(ratio(len(today), total)),
                pct(ratio(len(sooner), total)),
                num(statistics.median(today), 1) if today else "-",
                num(statistics.median(sooner), 1) if sooner else "-",
                str(max(sooner)) if sooner else "-",
            ]
        )
    print_rows(header, rows)
    median_big = statistics.median(big_delays) if big_delays else math.nan
    print(
        f"\n  targets: suspected precision >= {TARGET_PRECISION}: {num(precision)}"
        f" {'ok' if precision >= TARGET_PRECISION else 'MISSED'};"
        f" median delay, steps >= {100 * BIG_STEP:g}%, <= {TARGET_DELAY:g} points:"
        f" {num(median_big, 1)} {'ok' if median_big <= TARGET_DELAY else 'MISSED'}"
    )


# --- 2. quiet series ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Quiet:
    """One series of the quiet corpus."""

    category: str
    cv: float
    values: np.ndarray
    steps: tuple[int, ...]


def make_quiet(seed: int, bucket: int, index: int) -> Quiet:
    """Series ``index`` of noise level ``bucket`` (an index into ``QUIET_BUCKETS``)."""
    rng = np.random.default_rng([seed, 1000 + bucket, index])
    low, high = QUIET_BUCKETS[bucket]
    cv = math.exp(rng.uniform(math.log(low), math.log(high)))
    category = str(rng.choice(QUIET_CATEGORIES, p=QUIET_P))
    n = int(rng.integers(QUIET_LENGTHS[0], QUIET_LENGTHS[1] + 1))
    kind = "gauss" if rng.random() < 0.5 else "t3"
    level = np.full(n, math.exp(rng.uniform(math.log(0.1), math.log(1000.0))))
    steps: tuple[int, ...] = ()
    if category == "step":
        at = int(rng.integers(10, n - 9))
        level[at:] *= 1.0 + rng.uniform(*SNR) * cv * rng.choice((-1.0, 1.0))
        steps = (at,)
    elif category == "drift":
        level *= 1.0 + rng.uniform(0.02, 0.06) * rng.choice((-1.0, 1.0)) * np.linspace(0, 1, n)
    elif category == "bimodal":
        level *= 1.0 + rng.uniform(0.03, 0.06) * (rng.random(n) < rng.uniform(0.2, 0.5))
    values = level * (1.0 + cv * noise(rng, kind, n))
    if category == "outliers":
        for at in isolated_points(rng, n, int(rng.integers(1, 5))):
            values[at] = level[at] * (1.0 + rng.choice((-1.0, 1.0)) * rng.uniform(3, 10) * cv)
    return Quiet(category, cv, values, steps)


def quiet_scores(corpus: list[Quiet], config: DetectorConfig) -> tuple[float, float]:
    """Recall of the steps (within ``TOLERANCE``), false alarms per 1,000 step-free points."""
    hits = steps = false = points = 0
    for series in corpus:
        found = [cp.index for cp in find_change_points(series.values, config)]
        if series.steps:
            steps += 1
            hits += any(abs(f - series.steps[0]) <= TOLERANCE for f in found)
        else:
            false += len(found)
            points += len(series.values)
    return ratio(hits, steps), 1000 * ratio(false, points)


def print_quiet(seed: int, per_level: int) -> None:
    """Recall and false alarms per noise level, today's minimum effect against the default."""
    title = f"steps of {SNR[0]:g}-{SNR[1]:g}x the noise ({per_level} series per noise level)"
    print(f"\n=== {title} ===\n")
    header = ["noise CV [steps]", "recall today", "recall", "FA/1k today", "FA/1k"]
    rows = []
    configs: tuple[tuple[str, DetectorConfig], ...] = (
        ("today", TODAY),
        ("default", DetectorConfig()),
    )
    for b, bucket in enumerate(QUIET_BUCKETS):
        corpus = [make_quiet(seed, b, i) for i in range(per_level)]
        (r0, f0), (r1, f1) = (quiet_scores(corpus, config) for _, config in configs)
        steps = sum(bool(s.steps) for s in corpus)
        rows.append([f"{bucket_name(bucket)} [{steps}]", pct(r0), pct(r1), num(f0), num(f1)])
    print_rows(header, rows)


# --- main ------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """Walk the detection corpus, score the quiet corpus, print both."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="120 series walked, 150 per level")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    began = time.perf_counter()
    count = 120 if args.quick else 400
    walks = [walk(series) for series in make_corpus(args.seed, count)]
    print_suspected(walks, time.perf_counter() - began)
    print_quiet(args.seed, 150 if args.quick else 500)
    print(f"\nelapsed {time.perf_counter() - began:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
