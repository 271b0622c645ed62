"""Measurement fidelity: how much each timing metric moves between repeated runs of a tier.

Runs the smoke tier (or ``--quick``: the operators and three models, eager and inductor, fp32)
``--runs`` times in this process, alternating two measurement plans so that drift hits both:

- baseline: fixed repetitions, no warm-up, the garbage collector left running;
- benchwatch: the tier's plan (warm-up, the collector paused while timing, repetitions until
  the samples' spread is below 5%).

Threads are pinned (``torch.set_num_threads``) and dynamo's caches reset before each run, so
every run compiles as a fresh process would (inductor's on-disk cache stays warm). Prints,
per timing metric and plan, the coefficient of variation across runs of each case's figure:
median, 90th percentile and worst over the cases, and the ratio baseline / benchwatch.

    .venv/bin/python bench/fidelity.py [--runs 3] [--quick] [--threads 2]
"""

import argparse
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from workers.harness import Plan
from workers.run_suite import run_measurements
from workers.tiers import TIERS, Measurement, tier_measurements

TIMING = (
    "latency",
    "latency_p90",
    "latency_p99",
    "throughput",
    "speedup",
    "compilation_latency",
    "host_time",
    "allreduce_latency",
)
QUICK_CASES = ("matmul", "conv2d", "attention", "layer_norm", "softmax", "embedding_bag")
QUICK_MODELS = ("resnet", "bert", "lstm")
Figures = dict[tuple[str, tuple[Any, ...]], list[float]]


def measurements(quick: bool) -> list[Measurement]:
    """The smoke tier, or its quick subset."""
    every = tier_measurements(TIERS["smoke"])
    if not quick:
        return every
    return [
        m
        for m in every
        if m.case.model in QUICK_CASES + QUICK_MODELS
        and m.config in ("eager", "default")
        and m.precision == "fp32"
        and m.mode == "inference"
    ]


def collect(rows: list[dict[str, Any]], figures: Figures) -> None:
    """Add one run's timing figures, keyed by metric and benchmark."""
    for row in rows:
        if row["metric"] in TIMING and row.get("value") is not None:
            key = (
                row["model"],
                row["config"],
                row["precision"],
                row["mode"],
                str(row.get("params")),
            )
            figures[row["metric"], key].append(float(row["value"]))


def variation(values: list[float]) -> float:
    """Coefficient of variation (standard deviation over mean)."""
    mean = statistics.fmean(values)
    return statistics.stdev(values) / mean if mean else 0.0


def summarize(figures: Figures) -> dict[str, list[float]]:
    """Per metric, the coefficient of variation of each benchmark seen in every run."""
    runs = max(len(v) for v in figures.values())
    by_metric: dict[str, list[float]] = defaultdict(list)
    for (metric, _), values in figures.items():
        if len(values) == runs:
            by_metric[metric].append(variation(values))
    return by_metric


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(int(q / 100 * len(ordered)), len(ordered) - 1)]


def main() -> None:
    """Run the plans alternately and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    tuned = TIERS["smoke"].plan
    plans = {
        "baseline": Plan(repeats=tuned.repeats, warmup=0, max_repeats=0, quiet_gc=False),
        "benchwatch": tuned,
    }
    chosen = measurements(args.quick)
    print(
        f"{len(chosen)} measurements x {args.runs} runs x {len(plans)} plans on {device}, "
        f"{args.threads} threads"
    )
    figures: dict[str, Figures] = {name: defaultdict(list) for name in plans}
    for run in range(args.runs):
        for name, plan in plans.items():
            torch._dynamo.reset()
            began = time.perf_counter()
            collect(run_measurements(chosen, device, plan), figures[name])
            print(f"run {run + 1} {name}: {time.perf_counter() - began:.0f} s", flush=True)
    table = {name: summarize(f) for name, f in figures.items()}
    print(f"\n{'metric':<22}{'plan':<12}{'cases':>6}{'median CV':>11}{'p90 CV':>9}{'max CV':>9}")
    for metric in TIMING:
        for name in plans:
            cvs = table[name].get(metric)
            if cvs:
                print(
                    f"{metric:<22}{name:<12}{len(cvs):>6}{statistics.median(cvs):>10.1%}"
                    f"{percentile(cvs, 90):>9.1%}{max(cvs):>9.1%}"
                )
        base, ours = table["baseline"].get(metric), table["benchwatch"].get(metric)
        if base and ours and statistics.median(ours):
            ratio = statistics.median(base) / statistics.median(ours)
            print(f"{'':<22}{'ratio':<12}{'':>6}{ratio:>9.2f}x  (baseline / benchwatch median CV)")


if __name__ == "__main__":
    main()
