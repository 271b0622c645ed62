"""The alert quality page: the API's figures (``app.quality``), each with its plot."""

from typing import Any

import plotly.graph_objects as go
from sqlalchemy.orm import Session

from app.anomalies.deadlines import Deadlines
from app.core.escape import plotly as text
from app.dashboard.figures import PALETTE, Figure, figure_of, plain
from app.quality import service

KIND_COLORS = {
    "regression": "#cf222e",
    "improvement": "#1a7f37",
    "change": "#57606a",
    "noise": "#8250df",
    "bimodal": "#bf3989",
    "failure": "#953800",
    "coverage": "#0550ae",
    "aggregate": "#bf8700",
    "machine_silent": "#24292f",
}


def quality_page(session: Session, weeks: int, rules: Deadlines) -> dict[str, Any]:
    """The figures over the last ``weeks`` weeks, and a plot of each."""
    found = service.quality(session, weeks, rules)
    shares = found["invalid_share"]
    return found | {
        "plots": [
            ("per-week", "Findings per week, by kind", per_week(found["weeks"], found["per_week"])),
            (
                "times",
                "Time to triage and to fix",
                times(found["time_to_triage"], found["time_to_fix"]),
            ),
            ("invalid", "Share marked invalid, per suite", invalid_share(shares["suite"], "suite")),
            ("localizations", "Localization outcomes", outcomes(found["localizations"])),
        ],
        "weeks_back": weeks,
    }


def per_week(weeks: list[str], counts: dict[str, list[int]]) -> Figure:
    """Findings found per week, stacked by kind."""
    traces = [
        go.Bar(
            x=weeks,
            y=values,
            name=text(kind),
            marker={"color": KIND_COLORS.get(kind, PALETTE[i % len(PALETTE)])},
        )
        for i, (kind, values) in enumerate(counts.items())
    ]
    fig = figure_of([], "Findings per week (weeks start on Monday)", "findings", height=320)
    fig.add_traces(traces)
    fig.update_layout(barmode="stack")
    return plain(fig)


def times(triage: dict[str, Any], fix: dict[str, Any]) -> Figure:
    """Median and p90 hours to triage and to fix."""
    labels = ["to triage", "to fix"]
    traces = [
        go.Bar(x=labels, y=[triage[key], fix[key]], name=name, marker={"color": color})
        for key, name, color in (("median_h", "median", PALETTE[0]), ("p90_h", "p90", PALETTE[1]))
    ]
    fig = figure_of([], "Hours from found", "hours", height=300)
    fig.add_traces(traces)
    fig.update_layout(barmode="group")
    return plain(fig)


def invalid_share(rows: list[dict[str, Any]], by: str) -> Figure:
    """The share of labels marked invalid per ``by`` (the 20 with the most labels)."""
    shown = sorted(rows, key=lambda r: -r["labels"])[:20]
    bar = go.Bar(
        x=[r["invalid_share"] for r in shown],
        y=[text(str(r["key"])) for r in shown],
        orientation="h",
        marker={"color": "#cf222e"},
        hovertext=[f"{r['invalid']} of {r['labels']} labels" for r in shown],
        name="invalid",
    )
    fig = figure_of([bar], f"Share marked invalid per {by}", by, height=300)
    fig.update_xaxes(tickformat=".0%", range=[0, 1])
    return plain(fig)


def outcomes(states: dict[str, int]) -> Figure:
    """Localizations started in the window, by state."""
    bar = go.Bar(x=list(states), y=list(states.values()), marker={"color": PALETTE[3]}, name="")
    return plain(figure_of([bar], "Localizations by outcome", "localizations", height=300))
