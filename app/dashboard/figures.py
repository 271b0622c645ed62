"""The pages' Plotly figures as plain dicts, and SVG sparklines: data in, figure out, no I/O.

Builders lean on plotly's graph objects (checked properties, subplots, the template spelled
out as plotly.js needs it) and hand back ``Figure.to_dict()``; pages embed the dict with
``embed`` (the templates' ``embed`` filter).
"""

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import plotly.graph_objects as go
from plotly.io.json import to_json_plotly

from app.anomalies import shapes
from app.anomalies.detectors import SHAPES
from app.core.escape import plotly as text
from app.dashboard import format as fmt

Figure = dict[str, Any]  # a Plotly figure: {"data": [...], "layout": {...}}
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b")
LAYOUT = {
    "margin": {"l": 60, "r": 20, "t": 30, "b": 40},
    "hovermode": "closest",
    "legend": {"orientation": "h", "y": -0.2},
    "template": "plotly_white",
}
REGRESSION, IMPROVEMENT, NEUTRAL = "#cf222e", "#1a7f37", "#57606a"
OUTCOMES = {"good": IMPROVEMENT, "bad": REGRESSION, "halfway": "#ff7f0e", "reference": NEUTRAL}
MARK = "#8250df"  # annotations: a dotted line at their time, a band over their span
MARK_LABEL = 24  # characters of an annotation's text written above the chart
RANGE_BUTTONS = [
    {"count": 7, "label": "7d", "step": "day", "stepmode": "backward"},
    {"count": 30, "label": "30d", "step": "day", "stepmode": "backward"},
    {"step": "all", "label": "all"},
]
# Above the plot at the right: the title holds the top left.
RANGE_SELECTOR = {
    "buttons": RANGE_BUTTONS,
    "x": 1,
    "xanchor": "right",
    "y": 1.02,
    "yanchor": "bottom",
}
LOG_TICKS = "~g"  # 20, 30, 0.02: every tick in full, no SI prefix (a unit may be ms already)


def embed(figure: Mapping[str, Any]) -> str:
    """A figure's JSON, safe inside a ``<script type="application/json">`` element."""
    text = str(to_json_plotly(figure))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def sparkline(values: Sequence[float | None], width: int = 90, height: int = 22) -> str:
    """Points of an SVG polyline for a trend (empty when fewer than two values)."""
    present = [(i, v) for i, v in enumerate(values) if v is not None]
    if len(present) < 2:
        return ""
    low, high = min(v for _, v in present), max(v for _, v in present)
    last = max(len(values) - 1, 1)

    def y(value: float) -> float:  # a flat trend is drawn through the middle
        share = (value - low) / (high - low) if high > low else 0.5
        return height - 2 - share * (height - 4)

    return " ".join(f"{i * width / last:.1f},{y(v):.1f}" for i, v in present)


def figure_of(traces: list[go.Scatter], title: str, y_title: str, **layout: Any) -> go.Figure:
    """A figure with the dashboard's layout."""
    fig = go.Figure(data=traces)
    fig.update_layout(
        **LAYOUT, title={"text": text(title), "x": 0}, yaxis={"title": text(y_title)}, **layout
    )
    return fig


def plain(fig: go.Figure) -> Figure:
    """The figure as the dict a page embeds and a test reads."""
    plain: Figure = fig.to_dict()
    return plain


@functools.cache
def _template() -> dict[str, Any]:
    """The dashboard's template spelled out, as ``to_dict`` writes it into every figure."""
    spelled: dict[str, Any] = go.Figure(layout={"template": LAYOUT["template"]}).to_dict()
    return dict(spelled["layout"]["template"])


def built(traces: list[dict[str, Any]], title: str, y_title: str, **layout: Any) -> Figure:
    """A figure with the dashboard's layout, written as a dict without graph objects.

    For the figures a page draws many of (an alert group's step charts): building and
    checking graph objects costs more than the rest of such a page. The result is what
    ``plain(figure_of(...))`` gives for the same traces (``tests/dashboard/test_figures.py``).
    """
    return {
        "data": [{"type": "scatter", **trace} for trace in traces],
        "layout": {
            **LAYOUT,
            "template": _template(),
            "title": {"text": text(title), "x": 0},
            "yaxis": {"title": {"text": text(y_title)}},
            **layout,
        },
    }


def axis_title(metric: str, unit: str) -> str:
    """A value axis' title: the metric, and its unit where it has one."""
    return f"{metric} ({unit})" if unit else metric


def distributions(
    labels: Sequence[str],
    samples: Sequence[Sequence[float] | None],
    metric: str,
    title: str,
    unit: str,
) -> Figure:
    """A case's samples on each side as overlaid histograms: two modes show as two humps."""
    traces = [
        go.Histogram(
            x=list(values),
            name=text(label),
            opacity=0.6,
            nbinsx=30,
            marker={"color": PALETTE[index % len(PALETTE)]},
        )
        for index, (label, values) in enumerate(zip(labels, samples, strict=True))
        if values
    ]
    fig = figure_of([], title, "samples", height=260)
    fig.add_traces(traces)
    fig.update_layout(barmode="overlay")
    fig.update_xaxes(title_text=text(axis_title(metric, unit)))
    return plain(fig)


def compare_scatter(
    labels: Sequence[str],
    values: Sequence[Sequence[float | None]],
    hover: Sequence[str],
    metric: str,
    unit: str,
) -> Figure:
    """Every other side's value (y) against the base's (x), per case, on log axes.

    Args:
        labels: the sides' names, the base first.
        values: per case, each side's value (None: not measured).
        hover: per case, what a point's tooltip names.
        metric: the metric compared.
        unit: its unit.

    Returns:
        A trace per side after the base, and a dotted no-change diagonal.
    """
    cases = [(v, h) for v, h in zip(values, hover, strict=True) if v[0] is not None]
    traces = []
    for index, label in enumerate(labels[1:], start=1):
        kept = [(v, h) for v, h in cases if v[index] is not None]
        traces.append(
            go.Scatter(
                x=[v[0] for v, _ in kept],
                y=[v[index] for v, _ in kept],
                mode="markers",
                name=text(label),
                hovertext=[text(h) for _, h in kept],
                hoverinfo="text+x+y",
            )
        )
    limits = [x for v, _ in cases for x in v if x is not None and x > 0]
    if limits:
        low, high = min(limits), max(limits)
        traces.append(
            go.Scatter(
                x=[low, high],
                y=[low, high],
                mode="lines",
                name="no change",
                line={"dash": "dot", "color": "#8c959f"},
                hoverinfo="skip",
            )
        )
    axis = axis_title(metric, unit)
    fig = figure_of(traces, f"{labels[0]} (x) vs the others (y)", axis, height=420)
    # A tick format makes plotly write every tick in full: by default a log axis labels the
    # ticks between powers of ten with their first digit alone ("2, 3" for 20, 30).
    fig.update_xaxes(title_text=text(f"{labels[0]}: {axis}"), type="log", tickformat=LOG_TICKS)
    fig.update_yaxes(type="log", tickformat=LOG_TICKS)
    return plain(fig)


@dataclass(frozen=True)
class Point:
    """One run's result on a series line."""

    at: datetime
    value: float | None
    status: str
    low: float | None  # the raw samples' spread
    high: float | None
    run_id: int
    commit: str | None
    torch: str | None  # None: the run has no environment


@dataclass(frozen=True)
class Step:
    """A step detection found on a line, at its first bad run."""

    id: int
    label: str
    at: datetime
    direction: str
    rel_change: float
    before: float
    after: float
    status: str
    group_id: int | None
    unit: str


@dataclass(frozen=True)
class Line:
    """One line of the series chart: a series, named as the legend shows it."""

    name: str
    unit: str
    points: list[Point]
    steps: list[Step]


@dataclass(frozen=True)
class Mark:
    """An annotation on a chart: an event at ``at``, or a span until ``ends_at``."""

    id: int
    at: datetime
    ends_at: datetime | None
    text: str
    scope: str  # where it applies, in words ("everywhere", "h100-8 · nightly")


def series_chart(
    lines: Sequence[Line],
    metric: str,
    mode: str,
    by: str,
    unit: str,
    marks: Sequence[Mark] = (),
) -> Figure:
    """Lines over time, each with its samples' band and a marker per step; annotations.

    Args:
        lines: the lines, in legend order.
        metric: the metric drawn.
        mode: training or inference.
        by: what tells the lines apart (config, precision or channel).
        unit: the metric's unit.
        marks: the annotations to draw, oldest first.

    Returns:
        Per line: the band (when samples exist), the line, then its steps. Per annotation: a
        dotted line (an event) or a shaded band (a span), and a label above the plot whose
        hover text is the annotation's.
    """
    traces: list[go.Scatter] = []
    for index, line in enumerate(lines):
        color = PALETTE[index % len(PALETTE)]
        traces += _band(line, color)
        traces.append(
            go.Scatter(
                x=[p.at for p in line.points],
                y=[p.value if p.status == "ok" else None for p in line.points],
                name=text(line.name),
                mode="lines+markers",
                marker={"size": 4, "color": color},
                line={"color": color, "width": 1.5},
                hovertext=[_point_hover(p, line.unit) for p in line.points],
                hoverinfo="text+name",
                legendgroup=line.name,
            )
        )
        traces += _markers(line, color)
    fig = figure_of(traces, f"{metric} · {mode} · by {by}", axis_title(metric, unit))
    fig.update_xaxes(rangeselector=RANGE_SELECTOR)
    _annotate(fig, marks)
    return plain(fig)


def _annotate(fig: go.Figure, marks: Sequence[Mark]) -> None:
    """A dotted line or a shaded span per annotation, with a label that tells its text.

    The text is the user's: escaped, so that plotly draws it as typed (plotly reads tags in
    labels and hover text).
    """
    for mark in marks:
        common = {"xref": "x", "yref": "paper", "y0": 0, "y1": 1, "name": f"annotation-{mark.id}"}
        if mark.ends_at is None:
            line = {"color": MARK, "width": 1.5, "dash": "dot"}
            fig.add_shape(type="line", x0=mark.at, x1=mark.at, line=line, **common)
        else:
            fig.add_shape(
                type="rect",
                x0=mark.at,
                x1=mark.ends_at,
                fillcolor=MARK,
                opacity=0.12,
                line={"width": 0},
                layer="below",
                **common,
            )
        label = mark.text if len(mark.text) <= MARK_LABEL else mark.text[: MARK_LABEL - 1] + "…"
        when = f"{mark.at:%Y-%m-%d %H:%M}" + (
            f" to {mark.ends_at:%Y-%m-%d %H:%M}" if mark.ends_at else ""
        )
        fig.add_annotation(
            x=mark.at,
            y=1,
            xref="x",
            yref="paper",
            xanchor="left",
            yanchor="bottom",
            showarrow=False,
            text=f"⚑ {text(label)}",
            font={"size": 10, "color": MARK},
            hovertext=(f"{text(mark.text)}<br>{when} UTC<br>{text(mark.scope)}"),
            name=f"annotation-{mark.id}",
        )


def _point_hover(point: Point, unit: str) -> str:
    return (
        f"{fmt.number(point.value, unit)}<br>commit {text(point.commit or '?')}<br>"
        f"torch {'?' if point.torch is None else text(point.torch)}<br>run {point.run_id}"
        + ("" if point.status == "ok" else f"<br>{text(point.status)}")
    )


def _band(line: Line, color: str) -> list[go.Scatter]:
    """The raw samples' spread (min to max) as a band under the line."""
    if not any(p.low is not None for p in line.points):
        return []
    common = {"mode": "lines", "showlegend": False, "hoverinfo": "skip", "legendgroup": line.name}
    x = [p.at for p in line.points]
    return [
        go.Scatter(x=x, y=[p.high for p in line.points], line={"width": 0}, **common),
        go.Scatter(
            x=x,
            y=[p.low for p in line.points],
            line={"width": 0},
            fill="tonexty",
            fillcolor=transparent(color),
            **common,
        ),
    ]


def transparent(color: str) -> str:
    """A ``#rrggbb`` colour as a faint fill."""
    red, green, blue = (int(color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({red},{green},{blue},0.15)"


STEP_COLORS = {"regression": REGRESSION, "noise": MARK, "bimodal": MARK}  # else improvement


def _step_symbol(step: Step) -> str:
    """A step's marker points its way; a shape change's is a diamond (no level moved)."""
    if step.direction in SHAPES:
        return "diamond"
    return "triangle-up" if step.rel_change > 0 else "triangle-down"


def _markers(line: Line, color: str) -> list[go.Scatter]:
    """A marker per step at its first bad run, with the before and after levels."""
    if not line.steps:
        return []
    found = line.steps
    return [
        go.Scatter(
            x=[s.at for s in found],
            y=[s.after for s in found],
            mode="markers",
            name=text(f"{line.name}: steps"),
            legendgroup=line.name,
            marker={
                "symbol": [_step_symbol(s) for s in found],
                "size": 13,
                "color": [STEP_COLORS.get(s.direction, IMPROVEMENT) for s in found],
                "line": {"color": color, "width": 1},
            },
            hovertext=[
                (
                    f"{shapes.in_words(s.direction, s.rel_change)}<br>level "
                    if s.direction in SHAPES
                    else f"{s.direction} {fmt.percent(s.rel_change)}<br>"
                )
                + f"{fmt.number(s.before, s.unit)} → {fmt.number(s.after, s.unit)}"
                f"<br>status {text(s.status)}"
                for s in found
            ],
            hoverinfo="text",
        )
    ]


def step_chart(
    points: Sequence[tuple[datetime, float | None]],
    at: datetime,
    levels: tuple[float, float],
    metric: str,
    title: str,
    unit: str,
) -> Figure:
    """A series around a step, with the level before it and the level after it.

    Args:
        points: the series' results, oldest first.
        at: when the first bad run started.
        levels: the level before the step and the level after it.
        metric: the series' metric.
        title: the chart's title.
        unit: the metric's unit.

    Returns:
        The series, then dashed before and after levels across their points.
    """
    before = [x for x, _ in points if x < at]
    after = [x for x, _ in points if x >= at]
    traces = [
        _around(points, metric),
        level_line(before, levels[0], "before", NEUTRAL),
        level_line(after, levels[1], "after", REGRESSION),
    ]
    return built(traces, title, unit, height=240, showlegend=False)


def _around(points: Sequence[tuple[datetime, float | None]], metric: str) -> dict[str, Any]:
    """The series around a finding, as its chart draws it."""
    return {
        "x": [x for x, _ in points],
        "y": [y for _, y in points],
        "mode": "lines+markers",
        "name": text(metric),
        "marker": {"size": 4},
    }


def shape_chart(
    points: Sequence[tuple[datetime, float | None]],
    at: datetime,
    kind: str,
    metric: str,
    title: str,
    unit: str,
) -> Figure:
    """A series around a shape change, beside the distributions of its points either side.

    Args:
        points: the series' results, oldest first.
        at: when the first run of the new shape started.
        kind: ``noise`` or ``bimodal``.
        metric: the series' metric.
        title: the chart's title.
        unit: the metric's unit.

    Returns:
        The series on the left; on the right, sharing its value axis, a histogram of the
        points before and one of the points after, overlaid: the spread that doubled, or
        the second mode, shows there.
    """
    before = [y for x, y in points if x < at and y is not None]
    after = [y for x, y in points if x >= at and y is not None]
    line = _around(points, metric)
    mark = {
        "x": [at, at],
        "y": [min(before + after, default=0), max(before + after, default=0)],
        "mode": "lines",
        "name": text(f"{kind} from here"),
        "line": {"dash": "dot", "color": MARK},
        "hoverinfo": "name",
    }
    sides = (("before", before, NEUTRAL), ("after", after, MARK))
    histograms = [
        {
            "type": "histogram",
            "y": values,
            "name": f"{side} ({len(values)} points)",
            "xaxis": "x2",
            "marker": {"color": color},
            "opacity": 0.55,
            "histnorm": "probability",
            "nbinsy": 30,
        }
        for side, values, color in sides
    ]
    return built(
        [line, mark, *histograms],
        title,
        unit,
        height=260,
        showlegend=False,
        barmode="overlay",
        xaxis={"domain": [0, 0.7]},
        xaxis2={"domain": [0.74, 1], "title": {"text": "share of points"}},
    )


def level_line(xs: Sequence[Any], level: float, name: str, color: str) -> dict[str, Any]:
    """A dashed line at ``level`` across the first to the last of ``xs``."""
    ends = [xs[0], xs[-1]] if xs else []
    return {
        "x": ends,
        "y": [level] * len(ends),
        "mode": "lines",
        "name": name,
        "line": {"dash": "dash", "color": color},
        "hovertext": f"{name}: {fmt.number(level)}",
        "hoverinfo": "text",
    }
