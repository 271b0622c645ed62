"""Comparisons: config vs config, run vs run, machine vs machine, and release lines side by side.

Every kind reduces to sides (a run, and for config comparisons a config within it) whose values
of one metric are matched per benchmark; the first side is the base. Geomeans of new / base
run over the benchmarks present on every side, as the PyTorch dashboard aggregates.
"""

import json
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.anomalies.models import Regression
from app.benchmarks.comparison import CaseKey, case_key, geomean_ratio, in_order, judge_rows
from app.benchmarks.models import Machine, Series
from app.benchmarks.service import list_machines
from app.core import spreadsheet
from app.core.errors import InvalidInput
from app.dashboard.figures import embed, figure
from app.dashboard.overview import default_channel, machine_channels, recent_runs
from app.runs.models import Run
from app.runs.service import get_run, list_run_results

KINDS = ("configs", "runs", "machines", "channels")
MAX_SIDES = 8  # each side reads a whole run's results


@dataclass(frozen=True)
class CompareQuery:
    """The page's state, from its URL."""

    kind: str = "configs"
    machine: str | None = None
    channel: str | None = None
    metric: str = "latency"
    mode: str = "inference"
    base_config: str = "default"
    new_config: str = "dynamic"
    base_run: int | None = None
    new_run: int | None = None
    base_machine: str | None = None
    new_machine: str | None = None
    channels: str = ""  # comma-separated, oldest release line first; empty: all of them


@dataclass(frozen=True)
class Side:
    """One side of a comparison: a run, narrowed to one config for config comparisons."""

    label: str
    run: Run
    config: str | None = None


def sides(session: Session, query: CompareQuery) -> list[Side]:
    """The sides a query names (base first); empty when there is nothing to compare yet."""
    machines = [m.name for m in list_machines(session)]
    machine = query.machine or (machines[0] if machines else None)
    if machine is None:
        return []
    channel = query.channel or default_channel(machine_channels(session, machine))
    if query.kind == "runs":
        latest = recent_runs(session, machine, channel, 2)
        base_id = query.base_run or (latest[-1].id if latest else None)
        new_id = query.new_run or (latest[0].id if latest else None)
        if base_id is None or new_id is None:
            return []
        return [
            Side(f"run {base_id}", get_run(session, base_id)),
            Side(f"run {new_id}", get_run(session, new_id)),
        ]
    if query.kind == "machines":
        names = [query.base_machine or machine, query.new_machine or _other(machines, machine)]
        return [Side(n, r[0]) for n in names if (r := recent_runs(session, n, channel, 1))]
    if query.kind == "channels":
        wanted = _channels(query.channels) or machine_channels(session, machine)[:MAX_SIDES]
        return [Side(c, r[0]) for c in wanted if (r := recent_runs(session, machine, c, 1))]
    latest = recent_runs(session, machine, channel, 1)
    if not latest:
        return []
    return [
        Side(query.base_config, latest[0], query.base_config),
        Side(query.new_config, latest[0], query.new_config),
    ]


def _channels(named: str) -> list[str]:
    """The channels a query names, each once; more than ``MAX_SIDES`` is a 422."""
    channels = list(dict.fromkeys(c for c in named.split(",") if c))
    if len(channels) > MAX_SIDES:
        raise InvalidInput(
            f"{len(channels)} channels named: compare at most {MAX_SIDES} at once",
            errors=[{"loc": "query.channels", "field": "channels", "message": "too many"}],
        )
    return channels


def _other(machines: list[str], machine: str) -> str:
    return next((m for m in machines if m != machine), machine)


def _values(session: Session, side: Side, query: CompareQuery) -> dict[CaseKey, dict[str, Any]]:
    """The side's result of the metric per case (keyed as ``GET /api/v1/compare`` keys them)."""
    return {
        case_key(row, config=side.config is None): row
        for row in list_run_results(session, side.run.id)
        if row["metric"] == query.metric
        and row["mode"] == query.mode
        and side.config in (None, row["config"])
    }


def comparison(session: Session, query: CompareQuery) -> dict[str, Any]:
    """The table, the geomeans, the scatter and the rollback targets of a comparison."""
    chosen = sides(session, query)
    context: dict[str, Any] = {"query": query, "kinds": KINDS, "sides": chosen}
    context |= _choices(session, query)
    if len(chosen) < 2:
        return context
    values = [_values(session, side, query) for side in chosen]
    rows = [_row(key, values) for key in in_order(set().union(*values))]
    unit = next((r["unit"] for r in rows if r["unit"]), "")
    higher = next((r["higher_is_better"] for r in rows if r["higher_is_better"] is not None), None)
    context |= {
        "rows": rows,
        "unit": unit,
        "higher_is_better": higher,
        "geomeans": [
            geomean_ratio(((r["values"][0], r["values"][i]) for r in rows), higher)
            for i in range(1, len(chosen))
        ],
        "common": sum(all(v is not None for v in r["values"]) for r in rows),
        "scatter": embed(_scatter(rows, chosen, query.metric, unit)),
        "rollback": _rollback_targets(session, chosen),
    }
    return context


def _row(key: CaseKey, values: list[dict[CaseKey, dict[str, Any]]]) -> dict[str, Any]:
    present = [side.get(key) for side in values]
    ident = next(r for r in present if r is not None)
    numbers = [r["value"] if r is not None and r["status"] == "ok" else None for r in present]
    changes = [judge_rows(present[0], r) for r in present[1:]]
    return {
        "model": ident["model"],
        "suite": ident["suite"],
        "precision": ident["precision"],
        "config": key[0].config,
        "batch_size": ident["batch_size"],
        "params": ident["params"],
        "unit": ident["unit"],
        "higher_is_better": ident["higher_is_better"],
        "values": numbers,
        "texts": [r["text_value"] if r is not None else None for r in present],
        "changes": [c.rel_change for c in changes],
        "verdicts": [c.verdict for c in changes],
    }


def _scatter(rows: list[dict[str, Any]], chosen: list[Side], metric: str, unit: str) -> go.Figure:
    traces = []
    both = [r for r in rows if r["values"][0] is not None]
    for index, side in enumerate(chosen[1:], start=1):
        kept = [r for r in both if r["values"][index] is not None]
        traces.append(
            go.Scatter(
                x=[r["values"][0] for r in kept],
                y=[r["values"][index] for r in kept],
                mode="markers",
                name=side.label,
                hovertext=[f"{r['model']} {r['precision']} {r['config']}" for r in kept],
                hoverinfo="text+x+y",
            )
        )
    limits = [v for r in both for v in r["values"] if v is not None and v > 0]
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
    label = f"{metric} ({unit})" if unit else metric
    fig = figure(traces, f"{chosen[0].label} (x) vs the others (y)", label, height=420)
    fig.update_xaxes(title_text=f"{chosen[0].label}: {label}", type="log")
    fig.update_yaxes(type="log")
    return fig


def _rollback_targets(session: Session, chosen: list[Side]) -> list[dict[str, Any]]:
    """Per machine and channel: the newest run before any open regression's first bad run."""
    targets = []
    for machine_id, channel in sorted({(s.run.machine_id, s.run.channel) for s in chosen}):
        open_since = session.scalar(
            select(Run.started_at)
            .join(Regression, Regression.first_bad_run_id == Run.id)
            .join(Series, Regression.series_id == Series.id)
            .where(Series.machine_id == machine_id, Series.channel == channel)
            .where(Regression.status == "new", Regression.direction == "regression")
            .order_by(Run.started_at)
            .limit(1)
        )
        query = select(Run).where(Run.machine_id == machine_id, Run.channel == channel)
        if open_since is not None:
            query = query.where(Run.started_at < open_since)
        good = session.scalar(query.order_by(Run.started_at.desc()).limit(1))
        if good is not None:
            targets.append({"run": good, "open_regressions": open_since is not None})
    return targets


def _choices(session: Session, query: CompareQuery) -> dict[str, Any]:
    machines = [m.name for m in list_machines(session)]
    machine = query.machine or (machines[0] if machines else None)
    channels = machine_channels(session, machine) if machine else []
    return {"machines": machines, "machine": machine, "channels_of_machine": channels}


def to_csv(context: dict[str, Any]) -> str:
    """The comparison table as CSV: one line per benchmark, a value and change per side."""
    labels = [side.label for side in context["sides"]]
    header = ["suite", "model", "precision", "config", "batch_size", "params", *labels] + [
        f"change {label}" for label in labels[1:]
    ]
    rows = [
        [row["suite"], row["model"], row["precision"], row["config"], row["batch_size"]]
        + [json.dumps(row["params"])]
        + ["" if v is None else v for v in row["values"]]
        + ["" if c is None else f"{c:.6f}" for c in row["changes"]]
        for row in context.get("rows", [])
    ]
    return spreadsheet.to_csv([header, *rows])


def machine_device(session: Session, name: str | None) -> str:
    """The device of a machine (to name its configs as its users do)."""
    return session.scalar(select(Machine.device).where(Machine.name == name)) or ""
