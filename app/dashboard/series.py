"""The series page: one benchmark's metric over time, one line per config, precision or channel."""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import plotly.graph_objects as go
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.anomalies.models import Regression
from app.benchmarks.models import Benchmark, Machine, Metric, Series
from app.benchmarks.service import SeriesFilter, list_machines, search_series
from app.dashboard import format as fmt
from app.dashboard.figures import PALETTE, embed, figure
from app.runs.downsample import downsample_indices
from app.runs.models import Environment, Result, Run
from app.runs.service import series_points

GROUPINGS = ("config", "precision", "channel")
MAX_POINTS = 400  # per line, after M4 downsampling (steps and extremes are kept)
RANGES = {"7": 7, "30": 30, "90": 90, "all": None}


@dataclass(frozen=True)
class SeriesQuery:
    """The page's state, straight from its URL."""

    machine: str | None = None
    channel: str = "nightly"
    suite: str | None = None
    model: str | None = None
    mode: str = "inference"
    precision: str = "fp32"
    config: str = "default"
    metric: str = "latency"
    by: str = "config"
    days: str = "90"


def choices(session: Session, query: SeriesQuery) -> dict[str, list[str]]:
    """What the page's selectors offer, from what is stored."""
    machines = [m.name for m in list_machines(session)]
    machine = query.machine or (machines[0] if machines else None)
    in_machine = select(Series.benchmark_id).join(Machine).where(Machine.name == machine)
    benchmarks = select(Benchmark).where(Benchmark.id.in_(in_machine))
    stored = list(session.scalars(benchmarks))
    metrics = select(Metric.name).join(Series).join(Machine).where(Machine.name == machine)
    channels = select(Series.channel).join(Machine).where(Machine.name == machine)
    return {
        "machine": machines,
        "channel": sorted(set(session.scalars(channels))),
        "suite": sorted({b.suite for b in stored}),
        "model": sorted({b.model for b in stored if query.suite in (None, b.suite)}),
        "mode": sorted({b.mode for b in stored}),
        "precision": sorted({b.precision for b in stored}),
        "config": sorted({b.config for b in stored}),
        "metric": sorted(set(session.scalars(metrics.distinct()))),
    }


def series_page(session: Session, query: SeriesQuery) -> dict[str, Any]:
    """The chart and the facts around it, or what is missing to draw it."""
    offered = choices(session, query)
    machine = query.machine or next(iter(offered["machine"]), None)
    model = query.model or next(iter(offered["model"]), None)
    context: dict[str, Any] = {
        "query": query,
        "choices": offered,
        "machine": machine,
        "model": model,
    }
    if machine is None or model is None:
        return context
    where = _filter(query, machine, model)
    found, _ = search_series(session, where, 0, 50)
    found = [s for s in found if query.suite in (None, s.benchmark.suite)]
    since = _since(session, [s.id for s in found], query.days)
    lines = [
        _line(session, s, query.by, since) for s in sorted(found, key=lambda s: _label(s, query.by))
    ]
    device = session.scalar(select(Machine.device).where(Machine.name == machine)) or ""
    unit = found[0].metric.unit if found else ""
    context |= {
        "series": found,
        "unit": unit,
        "figure": embed(_figure(lines, query, unit, device)) if found else None,
        "regressions": [r for line in lines for r in line.regressions],
        "points": sum(line.total for line in lines),
        "shown": sum(len(line.x) for line in lines),
    }
    return context


def _filter(query: SeriesQuery, machine: str, model: str) -> SeriesFilter:
    fixed: dict[str, str | None] = {
        "config": query.config,
        "precision": query.precision,
        "channel": query.channel,
    }
    fixed[query.by] = None  # the grouping dimension varies
    return SeriesFilter(
        model=model,
        mode=query.mode,
        metric=query.metric,
        machine=machine,
        config=fixed["config"],
        precision=fixed["precision"],
        channel=fixed["channel"],
    )


def _since(session: Session, series_ids: list[int], days: str) -> datetime | None:
    """The start of the range: that many days before the series' newest point."""
    span = RANGES.get(days, 90)
    newest = session.scalar(
        select(func.max(Result.measured_at)).where(Result.series_id.in_(series_ids))
    )
    return None if span is None or newest is None else newest - timedelta(days=span)


def _label(series: Series, by: str) -> str:
    if by == "channel":
        return series.channel
    return str(getattr(series.benchmark, by))


@dataclass
class Line:
    """One line of the chart."""

    label: str
    x: list[datetime]
    y: list[float | None]
    low: list[float | None]
    high: list[float | None]
    hover: list[str]
    total: int
    regressions: list[dict[str, Any]]


def _line(session: Session, series: Series, by: str, since: datetime | None) -> Line:
    rows = series_points(session, series.id, since, None)
    keep = downsample_indices([r.value for r in rows], MAX_POINTS)
    kept = [rows[i] for i in keep]
    torch = _torch_versions(session, {r.run_id for r in kept})
    unit = series.metric.unit
    return Line(
        label=_label(series, by),
        x=[r.measured_at for r in kept],
        y=[r.value if r.status == "ok" else None for r in kept],
        low=[min(r.samples) if r.samples else None for r in kept],
        high=[max(r.samples) if r.samples else None for r in kept],
        hover=[
            f"{fmt.number(r.value, unit)}<br>commit {r.commit or '?'}<br>"
            f"torch {torch.get(r.run_id, '?')}<br>run {r.run_id}"
            + ("" if r.status == "ok" else f"<br>{r.status}")
            for r in kept
        ],
        total=len(rows),
        regressions=_regressions(session, series, _label(series, by)),
    )


def _torch_versions(session: Session, run_ids: set[int]) -> dict[int, str]:
    query = select(Run.id, Environment.torch).join(Environment).where(Run.id.in_(run_ids))
    return {row.id: row.torch for row in session.execute(query)}


def _regressions(session: Session, series: Series, label: str) -> list[dict[str, Any]]:
    query = select(Regression, Run.started_at).join(Run, Regression.first_bad_run_id == Run.id)
    found = session.execute(query.where(Regression.series_id == series.id)).all()
    return [
        {
            "id": regression.id,
            "label": label,
            "at": at,
            "direction": regression.direction,
            "rel_change": regression.rel_change,
            "before": regression.before,
            "after": regression.after,
            "status": regression.status,
            "group_id": regression.group_id,
            "unit": series.metric.unit,
        }
        for regression, at in found
    ]


def _figure(lines: list[Line], query: SeriesQuery, unit: str, device: str) -> go.Figure:
    traces: list[go.Scatter] = []
    for index, line in enumerate(lines):
        color = PALETTE[index % len(PALETTE)]
        name = fmt.config_label(line.label, device) if query.by == "config" else line.label
        traces += _band(line, color, name)
        traces.append(
            go.Scatter(
                x=line.x,
                y=line.y,
                name=name,
                mode="lines+markers",
                marker={"size": 4, "color": color},
                line={"color": color, "width": 1.5},
                hovertext=line.hover,
                hoverinfo="text+name",
                legendgroup=name,
            )
        )
        traces += _markers(line, color, name)
    title = f"{query.metric} · {query.mode} · by {query.by}"
    fig = figure(traces, title, f"{query.metric} ({unit})" if unit else query.metric)
    fig.update_xaxes(
        rangeselector={
            "buttons": [
                {"count": 7, "label": "7d", "step": "day", "stepmode": "backward"},
                {"count": 30, "label": "30d", "step": "day", "stepmode": "backward"},
                {"step": "all", "label": "all"},
            ]
        }
    )
    return fig


def _band(line: Line, color: str, name: str) -> list[go.Scatter]:
    """The raw samples' spread (min to max) as a band under the line."""
    if not any(v is not None for v in line.low):
        return []
    return [
        go.Scatter(
            x=line.x,
            y=line.high,
            mode="lines",
            line={"width": 0},
            showlegend=False,
            hoverinfo="skip",
            legendgroup=name,
        ),
        go.Scatter(
            x=line.x,
            y=line.low,
            mode="lines",
            line={"width": 0},
            fill="tonexty",
            fillcolor=_transparent(color),
            showlegend=False,
            hoverinfo="skip",
            legendgroup=name,
        ),
    ]


def _transparent(color: str) -> str:
    red, green, blue = (int(color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({red},{green},{blue},0.15)"


def _markers(line: Line, color: str, name: str) -> list[go.Scatter]:
    """A marker per regression at its first bad run, with the before and after levels."""
    if not line.regressions:
        return []
    found = line.regressions
    return [
        go.Scatter(
            x=[r["at"] for r in found],
            y=[r["after"] for r in found],
            mode="markers",
            name=f"{name}: steps",
            legendgroup=name,
            marker={
                "symbol": [
                    "triangle-up" if r["rel_change"] > 0 else "triangle-down" for r in found
                ],
                "size": 13,
                "color": [
                    "#cf222e" if r["direction"] == "regression" else "#1a7f37" for r in found
                ],
                "line": {"color": color, "width": 1},
            },
            hovertext=[
                f"{r['direction']} {fmt.percent(r['rel_change'])}<br>"
                f"{fmt.number(r['before'], r['unit'])} → {fmt.number(r['after'], r['unit'])}"
                f"<br>status {r['status']}"
                for r in found
            ],
            hoverinfo="text",
        )
    ]
