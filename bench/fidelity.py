"""Measurement fidelity: how much latency and speedup move between repeated runs of a case.

Two comparisons (``--compare``):

- ``pinning`` (the default): a few models of a tier, eager and inductor (``default``) fp32
  inference, measured ``--runs`` times the way a worker's shard is: each time in a fresh shard
  child process (``workers.shard_runner.run_shard_process``), once with
  ``BENCHWATCH_PIN_CORES=off`` (before: no pinning, torch's own thread count) and once with
  ``--pin`` (after: ``auto`` by default), alternating which goes first so that drift and a warm
  compile cache favour neither. The tier is the real models' ``models`` where there is one,
  else ``smoke`` (its tiny models). Prints per case the coefficient of variation across runs
  of latency (eager, and compiled) and of the eager/compiled speedup, before and after side by
  side with their ratio (before / after: above 1, pinning steadied it), the median latency
  and the median within-run noise (the samples' MAD / median, ``extra.noise``), then the
  median over the cases. Pinning also sets torch's threads (one per pinned core); with
  ``--before-threads N`` the unpinned runs use N threads too (``OMP_NUM_THREADS``), so the
  two differ in the pinning alone.
- ``plans``: the smoke tier (or ``--quick``: the operators and three models, eager and
  inductor, fp32) in this process, alternating two measurement plans: baseline (fixed
  repetitions, no warm-up, the garbage collector left running) and benchwatch (the tier's
  plan: warm-up, the collector paused while timing, repetitions until the samples' spread is
  below 5%); per timing metric, the median, 90th percentile and worst CV over the cases.

    .venv/bin/python bench/fidelity.py [--runs 5] [--models mobilenet_v3_large,...] [--pin auto]
        [--before-threads 1]
    .venv/bin/python bench/fidelity.py --compare plans [--runs 3] [--quick] [--threads 2]
"""

import argparse
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.core.cpu_cores import parse_pin_cores
from workers.environment import cpu_governor
from workers.harness import Plan
from workers.measurements import run_measurements
from workers.pinning import Pinning
from workers.shard_runner import run_shard_process
from workers.tiers import TIERS, Measurement, plan_shards, tier_measurements

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
# Small real models that compile within a few minutes on a 2-core CPU: a CNN of each family.
REAL_MODELS = ("mobilenet_v3_large", "tf_efficientnet_b0")
TINY_MODELS = ("resnet", "bert")
PINNED_METRICS = ("latency", "speedup")
# --compare plans measures in this process, as it is: the plans differ, not the cores.
IN_PROCESS = Pinning(how="not pinned: bench/fidelity.py --compare plans")
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


def case_key(row: dict[str, Any]) -> tuple[Any, ...]:
    """The benchmark a row measures."""
    return (row["model"], row["config"], row["precision"], row["mode"], str(row.get("params")))


def collect(rows: list[dict[str, Any]], figures: Figures) -> None:
    """Add one run's timing figures, keyed by metric and benchmark."""
    for row in rows:
        if row["metric"] in TIMING and row.get("value") is not None:
            figures[row["metric"], case_key(row)].append(float(row["value"]))


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


def compare_plans(args: argparse.Namespace) -> None:
    """Run the plans alternately in this process and print the table."""
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
            collect(run_measurements(chosen, device, plan, IN_PROCESS), figures[name])
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


class Runs:
    """What repeated shard runs of one variant measured: per (case, metric), per run."""

    def __init__(self) -> None:
        self.values: dict[tuple[str, str], list[float]] = defaultdict(list)
        self.noise: dict[tuple[str, str], list[float]] = defaultdict(list)
        self.pinning: dict[str, Any] = {}
        self.seconds: list[float] = []

    def add(self, rows: list[dict[str, Any]]) -> None:
        """One run's rows."""
        for row in rows:
            if row["metric"] not in PINNED_METRICS or row.get("value") is None:
                continue
            key = (f"{row['model']} {row['config']}", row["metric"])
            self.values[key].append(float(row["value"]))
            extra = row.get("extra") or {}
            if "noise" in extra:
                self.noise[key].append(float(extra["noise"]))
            self.pinning = extra.get("cpu_pinning", self.pinning)

    def cv(self, key: tuple[str, str]) -> float | None:
        """The CV across runs, where every run measured it."""
        values = self.values.get(key, [])
        return variation(values) if len(values) == len(self.seconds) > 1 else None


def compare_pinning(args: argparse.Namespace) -> None:
    """Run each variant's shard child alternately and print the table."""
    tier = args.tier or ("models" if "models" in TIERS else "smoke")
    models = args.models.split(",") if args.models else None
    models = models or list(REAL_MODELS if tier == "models" else TINY_MODELS)
    cases = [
        case
        for shard in plan_shards(tier, models)
        for case in shard.cases
        if case["config"] in ("eager", "default")
        and case["precision"] == "fp32"
        and case["mode"] == "inference"
    ]
    if not cases:
        raise SystemExit(f"no eager or default fp32 inference case of {models} in tier {tier!r}")
    variants = {"unpinned": "off", "pinned": args.pin}
    print(
        f"tier {tier}: {', '.join(models)}; eager and inductor fp32 inference; {args.runs} runs "
        f"x {len(variants)} variants (a shard child each); torch's default threads here: "
        f"{torch.get_num_threads()}, before: {args.before_threads or 'the default'}; "
        f"CPU governor: {cpu_governor()}",
        flush=True,
    )
    measured = {name: Runs() for name in variants}
    threads = _threads_by_variant(args.before_threads)
    for run in range(args.runs):
        order = list(variants) if run % 2 == 0 else list(reversed(variants))
        for name in order:
            os.environ["BENCHWATCH_PIN_CORES"] = variants[name]
            _set_env("OMP_NUM_THREADS", threads[name])
            began = time.perf_counter()
            outcome = run_shard_process(
                {"tier": tier, "cases": cases},
                timeout_s=args.timeout,
                heartbeat=lambda: True,
                every_s=5.0,
            )
            if outcome.rows is None:
                raise SystemExit(f"run {run + 1} {name} failed: {outcome.reason}")
            measured[name].seconds.append(time.perf_counter() - began)
            measured[name].add(outcome.rows)
            print(f"run {run + 1} {name}: {measured[name].seconds[-1]:.0f} s", flush=True)
    print_pinning(measured["unpinned"], measured["pinned"])


def _threads_by_variant(before_threads: int | None) -> dict[str, str | None]:
    """OMP_NUM_THREADS for each variant's child: as given here, but ``--before-threads``."""
    given = os.environ.get("OMP_NUM_THREADS")
    return {"unpinned": str(before_threads) if before_threads else given, "pinned": given}


def _set_env(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def print_pinning(before: Runs, after: Runs) -> None:
    """Per case and metric, CV and noise before and after, and the medians over cases."""
    print(f"\npinned: {after.pinning}\n")
    print(
        f"{'case':<34}{'metric':<9}{'CV before':>10}{'CV after':>10}{'ratio':>8}"
        f"{'median before':>15}{'median after':>14}{'noise before':>14}{'noise after':>13}"
    )
    ratios: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for key in sorted(before.values):
        cv_before, cv_after = before.cv(key), after.cv(key)
        if cv_before is None or cv_after is None:
            continue
        case, metric = key
        ratios[metric].append((cv_before, cv_after))
        unit = " ms" if metric == "latency" else "x"
        print(
            f"{case:<34}{metric:<9}{cv_before:>10.1%}{cv_after:>10.1%}"
            f"{_ratio(cv_before, cv_after):>8}"
            f"{statistics.median(before.values[key]):>12.2f}{unit:<3}"
            f"{statistics.median(after.values[key]):>11.2f}{unit:<3}"
            f"{_median(before.noise.get(key)):>14}{_median(after.noise.get(key)):>13}"
        )
    for metric, pairs in sorted(ratios.items()):
        cv_before = statistics.median(b for b, _ in pairs)
        cv_after = statistics.median(a for _, a in pairs)
        print(
            f"{'median over ' + str(len(pairs)) + ' cases':<34}{metric:<9}{cv_before:>10.1%}"
            f"{cv_after:>10.1%}{_ratio(cv_before, cv_after):>8}"
        )
    took = statistics.fmean(before.seconds), statistics.fmean(after.seconds)
    print(f"\nmean seconds per shard run: before {took[0]:.0f}, after {took[1]:.0f}")


def _ratio(before: float, after: float) -> str:
    return f"{before / after:.2f}x" if after else "-"


def _median(values: list[float] | None) -> str:
    return f"{statistics.median(values):.1%}" if values else "-"


def main() -> None:
    """Parse the options and run the comparison asked for."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--compare", choices=("pinning", "plans"), default="pinning")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tier", help="pinning: the tier (default: models, else smoke)")
    parser.add_argument("--models", help=f"pinning: comma-separated (default: {REAL_MODELS})")
    parser.add_argument("--pin", default="auto", help="pinning: BENCHWATCH_PIN_CORES after")
    parser.add_argument("--timeout", type=float, default=1800.0, help="pinning: per shard run")
    parser.add_argument(
        "--before-threads",
        type=int,
        help="pinning: OMP_NUM_THREADS of the unpinned runs (default: torch's own count); "
        "the pinned runs' count unpinned tells pinning from the thread count",
    )
    parser.add_argument("--quick", action="store_true", help="plans: a subset of smoke")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="plans")
    args = parser.parse_args()
    if args.runs < 2:
        parser.error("--runs: at least 2, for a variation across runs")
    if args.tier is not None and args.tier not in TIERS:
        parser.error(f"--tier: one of {', '.join(TIERS)}")
    try:
        parse_pin_cores(args.pin)
    except ValueError as error:
        parser.error(f"--pin: {error}")
    if args.compare == "plans":
        compare_plans(args)
    else:
        compare_pinning(args)


if __name__ == "__main__":
    main()
