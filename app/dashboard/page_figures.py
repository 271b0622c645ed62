"""The figures of single pages: a run's hardware, verdicts, probes, a step's kernels.

Plain dicts, data in, figure out, no I/O, with ``figures``' layout and helpers.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.core.escape import plotly as text
from app.dashboard import format as fmt
from app.dashboard.figures import (
    IMPROVEMENT,
    LAYOUT,
    MARK,
    NEUTRAL,
    OUTCOMES,
    PALETTE,
    REGRESSION,
    Figure,
    Point,
    axis_title,
    built,
    figure_of,
    level_line,
    plain,
    transparent,
)
from app.kernels.diff import KernelDiff
from app.kernels.identity import Identity


def probe_chart(
    probes: Sequence[tuple[int, str, str, Sequence[float]]],
    levels: tuple[float | None, float | None],
    metric: str,
    unit: str,
) -> Figure:
    """A localization's probes: (position, label, outcome, samples) each, in order.

    A trace of points per outcome, each sample at its probe's position, then the good and bad
    references' medians (``levels``; None: not measured) as dashed lines across.
    """
    traces = []
    for outcome in dict.fromkeys(o for _, _, o, _ in probes):
        mine = [(x, label, v) for x, label, o, s in probes if o == outcome for v in s]
        marker = {"size": 6, "opacity": 0.7, "color": OUTCOMES.get(outcome, MARK)}
        hover = [f"{text(label)}<br>{fmt.number(v, unit)}" for _, label, v in mine]
        xs, ys = [x for x, _, _ in mine], [v for _, _, v in mine]
        trace = {"x": xs, "y": ys, "mode": "markers", "name": text(outcome), "marker": marker}
        traces.append(trace | {"hovertext": hover, "hoverinfo": "text"})
    ends = [min(p[0] for p in probes) - 0.5, max(p[0] for p in probes) + 0.5] if probes else []
    sides = (("good", IMPROVEMENT), ("bad", REGRESSION))
    for (side, color), level in zip(sides, levels, strict=True):
        if level is not None:
            traces.append(level_line(ends, level, f"{side} reference median", color))
    axis = {"title": {"text": "probe"}, "dtick": 1}
    return built(traces, "Probes' samples", axis_title(metric, unit), height=340, xaxis=axis)


def hardware_chart(panels: Mapping[str, Sequence[tuple[str, float]]]) -> Figure | None:
    """A panel per hardware metric: its value per case, in the order the cases ran.

    Args:
        panels: per metric, in panel order, (case label, value) in run order.

    Returns:
        The stacked panels sharing the x axis; None without any.
    """
    if not panels:
        return None
    names = list(panels)
    titles = [text(name) for name in names]
    fig = make_subplots(rows=len(names), cols=1, shared_xaxes=True, subplot_titles=titles)
    for index, metric in enumerate(names, start=1):
        fig.add_trace(
            go.Scatter(
                x=list(range(len(panels[metric]))),
                y=[value for _, value in panels[metric]],
                hovertext=[text(label) for label, _ in panels[metric]],
                hoverinfo="text+y",
                mode="lines",
                name=text(metric),
                line={"color": PALETTE[index % len(PALETTE)]},
            ),
            row=index,
            col=1,
        )
    fig.update_layout(**LAYOUT, height=160 * len(names) + 60, showlegend=False)
    fig.update_xaxes(title_text="case, in run order", row=len(names), col=1)
    return plain(fig)


@dataclass(frozen=True)
class BranchResult:
    """A branch's result and what it was judged against, for ``verdict_chart``."""

    at: datetime  # when the branch's run started
    value: float
    verdict: str  # regression or improvement
    base: float | None  # the baseline's median
    band: tuple[float, float] | None  # the baseline's median ± the least change that counts
    label: str  # the branch, as the legend names its marker
    hover: tuple[str, ...]  # lines of the hover text, each escaped


def verdict_chart(
    points: Sequence[Point],
    fork_run_id: int | None,
    judged: BranchResult,
    title: str,
    channel: str,
    unit: str,
) -> Figure:
    """The default branch's recent points, the fork point, and a branch's result against them.

    Args:
        points: the default branch's points, oldest first: up to the fork point and a few
            after it, for context (drawn dotted).
        fork_run_id: the default branch's run the result was judged against.
        judged: the branch's result, its verdict and its baseline.
        title: the chart's title.
        channel: the default branch's channel, as the legend names its line.
        unit: the metric's unit.

    Returns:
        The band, the median, the line up to the fork point, the line after it, the fork
        point's marker and the branch's result, as far as each exists.
    """
    fork_index = next((i for i, p in enumerate(points) if p.run_id == fork_run_id), None)
    # The line after the fork starts at the fork point, so the two lines join.
    before = list(points if fork_index is None else points[: fork_index + 1])
    after = [] if fork_index is None else list(points[fork_index:])
    xs = [p.at for p in points] + [judged.at]
    span = [min(xs), max(xs)]
    traces: list[go.Scatter] = []
    if judged.band is not None:
        low, high = judged.band
        common = {"x": span, "mode": "lines", "line": {"width": 0}, "hoverinfo": "skip"}
        traces += [
            go.Scatter(y=[high, high], showlegend=False, legendgroup="band", **common),
            go.Scatter(
                y=[low, low],
                fill="tonexty",
                fillcolor=transparent(NEUTRAL),
                name="baseline ± least change",
                legendgroup="band",
                **common,
            ),
        ]
    if judged.base is not None:
        traces.append(
            go.Scatter(
                x=span,
                y=[judged.base, judged.base],
                mode="lines",
                name="baseline median",
                line={"dash": "dash", "color": NEUTRAL, "width": 1},
                hovertext=f"baseline median {fmt.number(judged.base, unit)}",
                hoverinfo="text",
            )
        )
    if before:
        traces.append(_verdict_line(before, channel, unit, "solid"))
    if len(after) > 1:
        traces.append(_verdict_line(after, f"{channel} after the fork", unit, "dot"))
    if fork_index is not None:
        fork = points[fork_index]
        traces.append(
            go.Scatter(
                x=[fork.at],
                y=[fork.value if fork.status == "ok" else None],
                mode="markers",
                name="fork point",
                marker={
                    "size": 11,
                    "symbol": "circle-open",
                    "color": NEUTRAL,
                    "line": {"width": 2},
                },
                hovertext=f"fork point: run {fork.run_id}, commit {text(fork.commit or '?')}",
                hoverinfo="text",
            )
        )
    color = REGRESSION if judged.verdict == "regression" else IMPROVEMENT
    traces.append(
        go.Scatter(
            x=[judged.at],
            y=[judged.value],
            mode="markers",
            name=text(judged.label),
            marker={"size": 13, "symbol": "diamond", "color": color},
            hovertext="<br>".join(text(line) for line in judged.hover),
            hoverinfo="text",
        )
    )
    fig = figure_of(traces, title, unit, height=300)
    fig.update_layout(legend={"orientation": "h", "y": -0.25})
    return plain(fig)


def _verdict_line(points: Sequence[Point], name: str, unit: str, dash: str) -> go.Scatter:
    return go.Scatter(
        x=[p.at for p in points],
        y=[p.value if p.status == "ok" else None for p in points],
        mode="lines+markers",
        name=text(name),
        marker={"size": 4, "color": PALETTE[0]},
        line={"color": PALETTE[0], "width": 1.5, "dash": dash},
        hovertext=[
            f"{fmt.number(p.value, unit)}<br>commit {text(p.commit or '?')}<br>run {p.run_id}"
            + ("" if p.status == "ok" else f"<br>{text(p.status)}")
            for p in points
        ],
        hoverinfo="text",
    )


KERNELS_CHARTED = 12  # the kernels that carry most of a step, each a bar of the waterfall
KERNEL_LABEL = 40  # characters of a kernel's identity under its bar


def kernel_waterfall(found: KernelDiff) -> Figure:
    """A step, part by part, summing to it.

    A bar per kernel that moved most, then the other kernels and the time outside kernels,
    and the step they sum to.
    """
    moved = sorted(found.kernels, key=lambda k: -abs(k.delta_us))[:KERNELS_CHARTED]
    rest = sum(k.delta_us for k in found.kernels) - sum(k.delta_us for k in moved)
    parts = [
        *((_kernel_label(k.kind, k.name), k.delta_us) for k in moved),
        ("other kernels", rest + found.other_delta_us),
        ("outside kernels", found.outside_delta_us),
    ]
    trace = go.Waterfall(
        x=[*(text(label) for label, _ in parts), "step"],
        y=[*(delta for _, delta in parts), found.step_us],
        measure=[*("relative" for _ in parts), "total"],
        increasing={"marker": {"color": REGRESSION}},
        decreasing={"marker": {"color": IMPROVEMENT}},
        totals={"marker": {"color": NEUTRAL}},
        connector={"line": {"color": "#d0d7de"}},
        hovertemplate="%{x}: %{y:+.4g} us<extra></extra>",
    )
    fig = go.Figure(data=[trace])
    fig.update_layout(
        **LAYOUT,
        title={"text": "Where the step is (us per call)", "x": 0},
        yaxis={"title": "us per call"},
        height=360,
        showlegend=False,
    )
    return plain(fig)


def _kernel_label(kind: str, name: str) -> str:
    label = str(Identity(kind, name))
    return label if len(label) <= KERNEL_LABEL else label[: KERNEL_LABEL - 1] + "…"
