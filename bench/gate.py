"""The pull-request gate on the detection corpus: false failures and detected steps, per noise.

Each series of ``bench/detection.py``'s corpus (``uniform`` step mix) is cut into uploads as
a pull request's CI would make them: at each point ``t`` (from the 10th on), the point is a
branch's result and the points before it (since the last true step, 60 at most) are the
default branch's baseline; ``app.verdicts.judge.judge`` gives the verdict, with the metric
lower-is-better (a latency).

- **False failures**: on the step-free series (``no_change``, ``outliers``, ``bimodal``,
  ``drift``), the share of uploads judged ``regression``. Target: at most 1 in 200.
- **Detection**: on the step series, each true step of 10% or more, judged at its first
  point with the points of the level before it as baseline (a step down is judged with
  higher-is-better, so that every step is the harmful one). Target: at least 0.9.

Beside the detection rate, its **ceiling**: the detection an ideal one-point test would
reach at the target's false-failure rate, knowing the noise exactly and assuming it Gaussian
(a step of ``s`` at noise ``cv`` is caught with probability ``Phi(s / cv - z)``, ``z`` the
0.995 quantile): no gate that judges one point can do better at that rate.

Both per noise level (the series' coefficient of variation), since the gate sees one point
of the branch (and no samples here: the corpus has none; with samples the rank test can only
hold a verdict back). Run ``.venv/bin/python bench/gate.py [--quick] [--seed N]`` from the
repository root.
"""

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from app.verdicts.judge import judge  # noqa: E402
from bench.corpus import (  # noqa: E402
    NOISE_BUCKETS,
    Series,
    bucket_name,
    in_bucket,
    make_corpus,
    num,
    pct,
    print_rows,
    ratio,
)

NO_STEP = ("no_change", "outliers", "bimodal", "drift")
BASELINE = 60  # app.verdicts.service.HISTORY_POINTS: the level is the newest 20 of them
FIRST = 10  # points before the first upload judged
BIG_STEP = 0.10
TARGET_FALSE = 1 / 200
TARGET_DETECTION = 0.9


def false_failures(series: Series) -> tuple[int, int]:
    """Regressions among the uploads of a step-free series, and the uploads."""
    values = series.values
    failed = 0
    for t in range(FIRST, len(values)):
        verdict = judge(float(values[t]), list(values[max(0, t - BASELINE) : t]), False)
        failed += verdict.verdict == "regression"
    return failed, len(values) - FIRST


def ceiling(series: Series) -> list[float]:
    """Per true step of ``BIG_STEP`` or more: an ideal one-point test's chance to catch it."""
    from scipy.stats import norm

    z = float(norm.ppf(1 - TARGET_FALSE))
    return [
        float(norm.cdf(abs(size) / series.cv - z)) for size in series.sizes if abs(size) >= BIG_STEP
    ]


def detected(series: Series) -> list[bool]:
    """Per true step of ``BIG_STEP`` or more: whether its first point is judged a regression."""
    found = []
    bounds = [0, *series.steps]
    for k, (at, size) in enumerate(zip(series.steps, series.sizes, strict=True)):
        if abs(size) < BIG_STEP:
            continue
        baseline = list(series.values[max(bounds[k], at - BASELINE) : at])
        verdict = judge(float(series.values[at]), baseline, higher_is_better=size < 0)
        found.append(verdict.verdict == "regression")
    return found


def main(argv: list[str] | None = None) -> int:
    """Score the gate on the corpus and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="120 series instead of 600")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    began = time.perf_counter()
    corpus = make_corpus(args.seed, 120 if args.quick else 600)
    rows = []
    totals = [0, 0, 0, 0]  # failed, uploads, found, steps
    best: list[tuple[float, int]] = []  # the ceiling's expected catches, and steps
    for bucket in NOISE_BUCKETS:
        chosen = [s for s in corpus if in_bucket(s.cv, bucket)]
        failed = uploads = 0
        for series in (s for s in chosen if s.category in NO_STEP):
            f, u = false_failures(series)
            failed, uploads = failed + f, uploads + u
        steps = [s for s in chosen if s.category == "step"]
        hits = [hit for s in steps for hit in detected(s)]
        ideal = [p for s in steps for p in ceiling(s)]
        best.append((sum(ideal), len(ideal)))
        totals = [
            totals[0] + failed,
            totals[1] + uploads,
            totals[2] + sum(hits),
            totals[3] + len(hits),
        ]
        rows.append(
            [
                bucket_name(bucket),
                f"{uploads:,}",
                num(100 * ratio(failed, uploads), 2) + "%",
                f"{len(hits)}",
                pct(ratio(sum(hits), len(hits))),
                pct(ratio(sum(ideal), len(ideal))),
            ]
        )
    false_rate, detection = ratio(totals[0], totals[1]), ratio(totals[2], totals[3])
    top = ratio(sum(b[0] for b in best), sum(b[1] for b in best))
    rows.append(
        [
            "all",
            f"{totals[1]:,}",
            num(100 * false_rate, 2) + "%",
            f"{totals[3]}",
            pct(detection),
            pct(top),
        ]
    )
    took = time.perf_counter() - began
    print(f"pull-request gate on {len(corpus)} series (seed {args.seed}, {took:.0f} s)\n")
    header = [
        "noise CV",
        "step-free uploads",
        "false failures",
        f"steps >= {100 * BIG_STEP:g}%",
        "detected",
        "ceiling",
    ]
    print_rows(header, rows)
    print(
        f"\n  targets: false failures <= {100 * TARGET_FALSE:.1f}%: {num(100 * false_rate, 2)}%"
        f" {'ok' if false_rate <= TARGET_FALSE else 'MISSED'}; detection of steps >="
        f" {100 * BIG_STEP:g}% >= {TARGET_DETECTION:g}: {num(detection)}"
        f" {'ok' if detection >= TARGET_DETECTION else 'MISSED'} (an ideal one-point test:"
        f" {num(top)})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
