"""The verdicts page: a branch's run (a pull request's) against the default branch.

The verdicts are ``app.verdicts.service``'s, as ``GET /api/v1/runs/{id}/verdicts`` has them;
this page adds a chart per regression and improvement: the default branch's series around the
fork point, with the branch's result beside it. Anyone who may read the dashboard may open
it, so what it reads beyond the verdicts is bounded whatever the run: at most ``CHARTS``
charts of at most ``BEFORE + AFTER`` points each, and at most ``SHOWN`` rows per verdict.
"""

import math
from collections import defaultdict
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from sqlalchemy import and_, select
from sqlalchemy.orm import Session, aliased

from app.anomalies.detector_interface import DetectorThresholds
from app.anomalies.history import load_histories
from app.benchmarks.models import Benchmark, CompilerConfig, Metric, Series
from app.dashboard import format as fmt
from app.dashboard import page_figures
from app.dashboard.figures import Point
from app.dashboard.page_figures import BranchResult
from app.runs.branches import base_channel
from app.runs.models import Result, Run
from app.runs.reads import get_run, series_levels
from app.verdicts.service import verdicts_of

CHARTS = 12  # regressions first, then improvements, largest change first
BEFORE = 40  # the default branch's points up to the fork point, per chart
AFTER = 10  # and after it, for context
SHOWN = 200  # rows per verdict; the API has them all
PASSES_SHOWN = 100  # passes are many and the least interesting
SECTIONS = (  # verdict, title, one, many
    ("regression", "Regressions", "regression", "regressions"),
    ("improvement", "Improvements", "improvement", "improvements"),
    ("error", "Errors", "error", "errors"),
    ("no_baseline", "No baseline", "without a baseline", "without a baseline"),
    ("pass", "Passes", "pass", "passes"),
)
# An item's benchmark and metric as the verdicts name them (no params: see ``_mainline``).
Key = tuple[str, str, str, str, str, int | None, str]


def verdicts_page(session: Session, run_id: int, thresholds: DetectorThresholds) -> dict[str, Any]:
    """Everything the page shows: the header, a table per verdict, the charts."""
    # The verdicts first: a busy server refuses them before the page reads anything.
    verdicts = verdicts_of(session, run_id, thresholds)  # links are built here, relative
    run = get_run(session, run_id)
    default_channel = verdicts["default_branch_channel"]
    sections = []
    for kind, title, one, many in SECTIONS:
        items = [i for i in verdicts["items"] if i["verdict"] == kind]
        cap = PASSES_SHOWN if kind == "pass" else SHOWN
        sections.append(
            {
                "verdict": kind,
                "title": title,
                "count": len(items),
                "counted": f"{len(items)} {one if len(items) == 1 else many}",
                "rows": [_row(item, run, default_channel) for item in items[:cap]],
                "more": f"{len(items) - cap} more {many}" if len(items) > cap else "",
            }
        )
    moved = [i for i in verdicts["items"] if i["verdict"] in ("regression", "improvement")]
    charted = moved[:CHARTS]  # the service lists them worst first, largest change first
    baseline_runs = verdicts["baseline"]["run_ids"]
    return {
        "run": run,
        "verdicts": verdicts,
        "default_channel": default_channel,
        "baseline_run_id": baseline_runs[0] if baseline_runs else None,
        "sections": sections,
        "charts": _charts(session, run, charted, baseline_runs[0]) if baseline_runs else [],
        "not_charted": len(moved) - len(charted),
        "api_url": f"/api/v1/runs/{run.id}/verdicts",
    }


def _row(item: dict[str, Any], run: Run, default_channel: str) -> dict[str, Any]:
    """A table row: the item, its benchmark's name, and a link to its default-branch series."""
    query = {
        "machine": run.machine.name,
        "channel": default_channel,
        "suite": item["suite"],
        "model": item["model"],
        "mode": item["mode"],
        "precision": item["precision"],
        "config": item["config"],
        "metric": item["metric"],
    }
    return {**item, "series_link": "/series?" + urlencode(query)}


def _charts(
    session: Session, run: Run, items: list[dict[str, Any]], fork_run_id: int
) -> list[dict[str, Any]]:
    """A chart per item: the default branch's points around the fork point, and the result."""
    if not items:
        return []
    series_of = _mainline(session, run, items)
    wanted = sorted({s for item in items if (s := series_of(item)) is not None})
    fork = session.get(Run, fork_run_id)
    if fork is None or not wanted:
        return []
    histories = load_histories(session, wanted, fork.started_at, BEFORE)
    charts = []
    for index, item in enumerate(items, start=1):
        series_id = series_of(item)
        if series_id is None or item["new"] is None:
            continue
        history = histories.get(series_id)
        before = list(zip(history.run_ids, history.values, strict=True)) if history else []
        points = _points(session, series_id, before, fork, run.id)
        name = f"{item['model']} · {item['config']} · {item['precision']} · {item['mode']}"
        title = f"{name} · {item['metric']}"
        judged = BranchResult(
            at=run.started_at,
            value=item["new"],
            verdict=item["verdict"],
            base=item["base"],
            band=_band(item),
            label=f"{run.branch or run.channel} (this run)",
            hover=(f"{item['verdict']} {fmt.percent(item['rel_change'])}", str(item["reason"])),
        )
        figure = page_figures.verdict_chart(
            points, fork.id, judged, title, base_channel(run.channel), item["unit"]
        )
        charts.append({"id": f"verdict-chart-{index}", "title": title, "figure": figure})
    return charts


def _band(item: dict[str, Any]) -> tuple[float, float] | None:
    """The baseline's median ± the least relative change that counts, where both are known.

    A result inside it passes whatever the noise; one outside it must also clear the noise.
    """
    base, least = item["base"], item["threshold"]
    if base is None or least is None:
        return None
    return base - least * abs(base), base + least * abs(base)


def _points(
    session: Session, series_id: int, before: list[tuple[int, float]], fork: Run, this_run: int
) -> list[Point]:
    """The series' points up to the fork point (``before``), then at most ``AFTER`` more.

    The points after the fork point are context only: they were not part of the baseline.
    A default branch's own run is left out of its series' line (its result is the marker).
    """
    runs = select(Run.id, Run.started_at, Run.commit).where(Run.id.in_([r for r, _ in before]))
    known = {row.id: row for row in session.execute(runs)}
    points = [
        Point(
            at=known[r].started_at,
            value=value,
            status="ok" if math.isfinite(value) else "no value",
            low=None,
            high=None,
            run_id=r,
            commit=known[r].commit,
            torch=None,
        )
        for r, value in before
        if r in known and r != this_run
    ]
    drawn = {p.run_id for p in points} | {this_run}
    later = series_levels(session, series_id, fork.started_at, None, AFTER + len(drawn))
    points += [
        Point(p.measured_at, p.value, p.status, None, None, p.run_id, p.commit, None)
        for p in later
        if p.run_id not in drawn
    ][:AFTER]
    return points


def _mainline(
    session: Session, run: Run, items: list[dict[str, Any]]
) -> Callable[[dict[str, Any]], int | None]:
    """A lookup: an item -> the default branch's series it was judged on (None: none).

    A verdict names its benchmark without its params, so the run's results of the items'
    models are read and matched on the rest of the name and on the value; two benchmarks
    alike in all of these but their params share a chart.
    """
    mine, main = aliased(Series), aliased(Series)
    query = (
        select(
            main.id,
            Benchmark.suite,
            Benchmark.model,
            CompilerConfig.name,
            Benchmark.precision,
            Benchmark.mode,
            Benchmark.batch_size,
            Metric.name,
            Result.value,
        )
        .select_from(Result)
        .join(mine, Result.series_id == mine.id)
        .join(
            main,
            and_(
                main.benchmark_id == mine.benchmark_id,
                main.metric_id == mine.metric_id,
                main.machine_id == run.machine_id,
                main.channel == base_channel(run.channel),
            ),
        )
        .join(Benchmark, mine.benchmark_id == Benchmark.id)
        .join(CompilerConfig, Benchmark.compiler_config_id == CompilerConfig.id)
        .join(Metric, mine.metric_id == Metric.id)
        .where(
            Result.run_id == run.id,
            Benchmark.model.in_(sorted({i["model"] for i in items})),
            Metric.name.in_(sorted({i["metric"] for i in items})),
        )
    )
    found: dict[Key, list[tuple[float | None, int]]] = defaultdict(list)
    for series_id, *name, value in session.execute(query):
        found[_key_of(name)].append((value, series_id))

    def series_of(item: dict[str, Any]) -> int | None:
        candidates = found.get(_key(item), [])
        same = [s for v, s in candidates if v == item["new"]]
        return next(iter(same or [s for _, s in candidates]), None)

    return series_of


def _key(item: dict[str, Any]) -> Key:
    return (
        item["suite"],
        item["model"],
        item["config"],
        item["precision"],
        item["mode"],
        item["batch_size"],
        item["metric"],
    )


def _key_of(name: list[Any]) -> Key:
    suite, model, config, precision, mode, batch_size, metric = name
    return (suite, model, config, precision, mode, batch_size, metric)
