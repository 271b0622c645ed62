"""Notification matching cost: 1,000 subscriptions against one alert group of 45 findings.

Issue 14's target: matching takes at most 50 ms per alert group. Each timed round does what
``notifications.service.matching_subscriptions`` does once the rows are loaded: compile every
subscription's stored rules (JSON, as the database gives them back) and test each finding of
the group against each subscription, 45,000 checks. The subscriptions are a seeded mix of what
people write: a machine or suite, model globs and lists, a precision or config, a metric,
a direction or kind, a minimum change, and one or two excludes; a fifth match everything.
The end-to-end latency half of the issue's bench (upload to notice received) comes with
delivery.

``.venv/bin/python bench/notify.py [--subscriptions 1000] [--findings 45] [--rounds 50]``
"""

import argparse
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.notifications.matching import Finding, compile_subscription

TARGET_MS = 50.0
SUITES = ("huggingface", "timm_models", "torchbench")
MODELS = ("BertForMaskedLM", "T5Small", "resnet50", "vit_base", "llama", "DistilGPT2", "yolov3")
CONFIGS = ("eager", "default", "cudagraphs", "dynamic", "max_autotune")
PRECISIONS = ("amp", "bf16", "fp32")
METRICS = ("latency", "speedup", "compilation_latency", "dynamo_peak_mem", "graph_breaks")


def subscriptions(count: int, rng: random.Random) -> list[tuple[dict[str, Any], list[Any]]]:
    """``count`` seeded (match, exclude) rule sets as stored in the JSON columns."""
    made = []
    for index in range(count):
        match: dict[str, Any] = {}
        if index % 5:  # every fifth subscribes to everything
            match["machine"] = rng.choice(["h100-*", "a100-ci", ["h100-a", "h100-b"]])
            if rng.random() < 0.6:
                match["suite"] = rng.choice([*SUITES, list(SUITES[:2])])
            if rng.random() < 0.5:
                match["model"] = rng.choice(["Bert*", "*T5*", ["resnet*", "vit_*"], "llama"])
            if rng.random() < 0.3:
                match["precision"] = rng.choice(PRECISIONS)
            if rng.random() < 0.3:
                match["config"] = rng.choice([*CONFIGS, ["default", "dynamic"]])
            if rng.random() < 0.4:
                match["metric"] = rng.choice([*METRICS, ["latency", "speedup"]])
            if rng.random() < 0.5:
                match["direction"] = "regression"
            if rng.random() < 0.2:
                match["kind"] = ["regression", "failure"]
            if rng.random() < 0.5:
                match["min_rel_change"] = rng.choice([0.02, 0.05, 0.1])
        exclude = [
            {"model": rng.choice(["*Small", "yolo*"]), "mode": "training"}
            for _ in range(rng.choice([0, 0, 1, 2]))
        ]
        made.append((match, exclude))
    return made


def findings(count: int, rng: random.Random) -> list[Finding]:
    """A bad nightly's group: one machine and channel, ``count`` steps across the suites."""
    return [
        Finding(
            kind="regression",
            machine="h100-a",
            channel="nightly",
            suite=rng.choice(SUITES),
            model=rng.choice(MODELS),
            category="",
            config=rng.choice(CONFIGS),
            precision=rng.choice(PRECISIONS),
            mode=rng.choice(("training", "inference")),
            metric=rng.choice(METRICS),
            direction=rng.choice(("regression", "regression", "improvement")),
            rel_change=rng.uniform(-0.4, 0.4),
        )
        for _ in range(count)
    ]


def one_group(rules: list[tuple[dict[str, Any], list[Any]]], group: list[Finding]) -> int:
    """Compile every subscription and match the group's findings; how many pairs matched."""
    selected = 0
    for match, exclude in rules:
        matcher = compile_subscription(match, exclude)
        selected += sum(1 for finding in group if matcher.matches(finding))
    return selected


def main() -> int:
    """Time the rounds and print the figure against the target; 1 if it is missed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--subscriptions", type=int, default=1_000)
    parser.add_argument("--findings", type=int, default=45)
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args()
    rng = random.Random(20261202)
    rules = subscriptions(args.subscriptions, rng)
    group = findings(args.findings, rng)
    selected = one_group(rules, group)  # warm-up: the regex and fnmatch caches fill
    seconds = []
    for _ in range(args.rounds):
        began = time.perf_counter()
        one_group(rules, group)
        seconds.append(time.perf_counter() - began)
    ms = sorted(s * 1000 for s in seconds)
    p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
    verdict = "ok" if p95 <= TARGET_MS else "MISSED"
    print(
        f"matching {args.subscriptions:,} subscriptions x {args.findings} findings "
        f"({selected:,} pairs selected): median {statistics.median(ms):.1f} ms, "
        f"p95 {p95:.1f} ms per alert group (target <= {TARGET_MS:.0f} ms: {verdict})"
    )
    return 0 if verdict == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
