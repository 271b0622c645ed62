"""The run page: metadata, environment, coverage, failures and skips, hardware, kernels, pool."""

import json
import math
from collections import defaultdict
from typing import Any
from urllib.parse import urlencode

from sqlalchemy import JSON, case, or_, select, type_coerce
from sqlalchemy.orm import Session

from app.benchmarks.models import Benchmark, CompilerConfig, Metric, Series
from app.benchmarks.vocabulary import PASSING_ACCURACY
from app.core.errors import NotFound
from app.core.pagination import count_of
from app.dashboard import page_figures
from app.runs.branches import base_channel, is_branch_channel
from app.runs.models import Result
from app.runs.reads import get_run
from app.suite_runs.pools import read_pool

HARDWARE = (
    "gpu_utilization",
    "gpu_memory_used",
    "power",
    "temperature",
    "sm_clock",
    "cpu_utilization",
    "host_rss",
)
TOP_KERNELS = 15
HEADLINE = ("latency", "speedup", "peak_memory", "accuracy")
# Results one run page shows: a run may hold 100,000, and an anonymous reader pages through.
PAGE_SIZE = 500
MAX_PAGE_SIZE = 2_000


class PastTheEnd(NotFound):
    """A page number after the run's last page."""


def run_page(session: Session, run_id: int, page: int = 1, size: int = PAGE_SIZE) -> dict[str, Any]:
    """Everything the run page shows, for the ``page``-th ``size`` results in case order."""
    run = get_run(session, run_id)
    total = result_count(session, run_id)
    pages = max(1, -(-total // size))
    if page > pages:
        raise PastTheEnd(
            f"run {run_id} has {total:,} results, {pages:,} pages of {size}: "
            f"page {page:,} is past its last"
        )
    first = (page - 1) * size
    rows = page_rows(session, run_id, offset=first, limit=size)
    return {
        "paging": _paging(run_id, page, pages, size, first, len(rows), total),
        "run": run,
        "problems": _problems(rows),
        "cases": _cases(rows, run.machine.name, run.channel),
        "hardware": page_figures.hardware_chart(hardware_panels(rows)),
        "kernels": _top_kernels(rows),
        # A pooled run's nodes judged against each other (a drifted node is flagged): only a
        # worker's run has one; an uploader's extra is its own JSON, not benchwatch's verdict.
        "pool": read_pool(run.extra) if run.source == "worker" else None,
        # A branch's run (a pull request's) is judged against its default branch's channel.
        "verdicts_against": base_channel(run.channel) if is_branch_channel(run.channel) else None,
    }


def result_count(session: Session, run_id: int) -> int:
    """How many results the run holds (its shards' included)."""
    return count_of(session, select(Result.run_id).where(Result.run_id == run_id))


def _paging(
    run_id: int, page: int, pages: int, size: int, first: int, shown: int, total: int
) -> dict[str, Any]:
    """What the page says of its place: results first-last of total, and its neighbours."""

    def link(number: int) -> str:
        # Relative to the site, never a host: the page's own path with its page number.
        query = {"page": number} | ({"size": size} if size != PAGE_SIZE else {})
        return f"/runs/{run_id}?" + urlencode(query)

    return {
        "page": page,
        "pages": pages,
        "first": first + 1 if shown else 0,
        "last": first + shown,
        "total": total,
        "previous": link(page - 1) if page > 1 else None,
        "next": link(page + 1) if page < pages else None,
    }


def page_rows(
    session: Session, run_id: int, *, offset: int = 0, limit: int | None = None
) -> list[dict[str, Any]]:
    """The run's results with what the page shows: never raw samples (megabytes a run).

    ``extra`` only where the page reads it: a problem's ``why`` and a kernel count's kernels.
    """
    shown_extra = or_(Result.status != "ok", Metric.name.in_(("kernel_count", "accuracy")))
    query = (
        select(
            Benchmark.suite,
            Benchmark.model,
            Benchmark.mode,
            Benchmark.precision,
            CompilerConfig.name.label("config"),
            Benchmark.batch_size,
            Benchmark.params,
            Metric.name.label("metric"),
            Metric.unit,
            Result.status,
            Result.value,
            Result.text_value,
            Result.reason,
            type_coerce(case((shown_extra, Result.extra), else_=None), JSON).label("extra"),
        )
        .join(Series, Result.series_id == Series.id)
        .join(Benchmark, Series.benchmark_id == Benchmark.id)
        .join(CompilerConfig, Benchmark.compiler_config_id == CompilerConfig.id)
        .join(Metric, Series.metric_id == Metric.id)
        .where(Result.run_id == run_id)
        .order_by(Benchmark.suite, Benchmark.model, Benchmark.id, Metric.name, Result.series_id)
        .offset(offset)
        .limit(limit)
    )
    return [dict(row._mapping) for row in session.execute(query)]


def _problems(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One line per case that failed, failed accuracy or was skipped: failures first."""
    found: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in rows:
        accuracy = row["metric"] == "accuracy" and row["text_value"] not in (
            None,
            *PASSING_ACCURACY,
        )
        if row["status"] == "ok" and not accuracy:
            continue
        status = row["text_value"] if accuracy else row["status"]
        found.setdefault(_case_key(row), {**row, "status": status})
    return sorted(found.values(), key=lambda r: (r["status"] == "skipped", r["model"]))


def _case_key(row: dict[str, Any]) -> tuple[Any, ...]:
    # Canonical JSON: a parameter's value may be any JSON, lists and objects included.
    params = json.dumps(row["params"] or {}, sort_keys=True)
    return (row["suite"], row["model"], row["mode"], row["precision"], row["config"], params)


def _cases(rows: list[dict[str, Any]], machine: str, channel: str) -> list[dict[str, Any]]:
    """One line per benchmark with its headline metrics and a link to its series."""
    cases: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in rows:
        case = cases.setdefault(_case_key(row), {**row, "metrics": {}})
        if row["metric"] in HEADLINE:
            case["metrics"][row["metric"]] = row
    for case in cases.values():
        case["link"] = "/series?" + urlencode(
            {
                "machine": machine,
                "channel": channel,
                "model": case["model"],
                "mode": case["mode"],
                "precision": case["precision"],
                "config": case["config"],
                "metric": "latency",
            }
        )
    return list(cases.values())


def hardware_panels(rows: list[dict[str, Any]]) -> dict[str, list[tuple[str, float]]]:
    """Per hardware metric the run measured, in ``HARDWARE`` order: (case, value) in run order."""
    series: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for row in rows:
        if row["metric"] in HARDWARE and row["value"] is not None:
            label = f"{row['model']} {row['config']} {row['precision']} {row['mode']}"
            series[row["metric"]].append((label, row["value"]))
    return {metric: series[metric] for metric in HARDWARE if metric in series}


def _top_kernels(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The kernels (aten ops on a CPU) that took the most time, summed over the run's cases."""
    totals: dict[str, dict[str, float]] = defaultdict(lambda: {"time_us": 0.0, "calls": 0.0})
    for row in rows:
        if row["metric"] != "kernel_count" or not row["extra"]:
            continue
        # The workers' shape; an uploader's ``extra`` is any JSON object, so skip what differs.
        kernels = row["extra"].get("top_kernels")
        for kernel in kernels if isinstance(kernels, list) else []:
            if not isinstance(kernel, dict):
                continue
            entry = totals[str(kernel.get("name", "?"))]
            entry["time_us"] += _number(kernel.get("self_time_us"))  # per call of the case
            entry["calls"] += _number(kernel.get("calls"))
    ranked = sorted(totals.items(), key=lambda item: -item[1]["time_us"])[:TOP_KERNELS]
    return [{"name": name, **figures} for name, figures in ranked]


def _number(value: Any) -> float:
    """A stored JSON value as a figure; anything that is not a finite number counts as 0."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    number = float(value)
    return number if math.isfinite(number) else 0.0
