"""Plotly figures as JSON for the pages, and inline SVG sparklines."""

import json
from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b")
LAYOUT = {
    "margin": {"l": 60, "r": 20, "t": 30, "b": 40},
    "hovermode": "closest",
    "legend": {"orientation": "h", "y": -0.2},
    "template": "plotly_white",
}


def embed(figure: go.Figure) -> str:
    """The figure's JSON, safe inside a ``<script type="application/json">`` element."""
    return _safe(str(figure.to_json()))


def embed_data(data: Any) -> str:
    """Any JSON, safe inside a ``<script type="application/json">`` element."""
    return _safe(json.dumps(data, separators=(",", ":")))


def _safe(text: str) -> str:
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


def figure(traces: list[go.Scatter], title: str, y_title: str, **layout: Any) -> go.Figure:
    """A figure with the dashboard's layout."""
    fig = go.Figure(data=traces)
    fig.update_layout(**LAYOUT, title={"text": title, "x": 0}, yaxis={"title": y_title}, **layout)
    return fig
