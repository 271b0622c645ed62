"""The series page: one benchmark's metric over time, one line per config, precision or channel."""

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.annotations import service as annotations_service
from app.anomalies import sensitivity
from app.anomalies.models import Regression
from app.benchmarks.models import Benchmark, Machine, Metric, Series
from app.benchmarks.service import SeriesFilter, search_series
from app.core.names import DEFAULT_PROJECT
from app.dashboard import figures
from app.dashboard import format as fmt
from app.dashboard.figures import Line, Mark, Point, Step
from app.dashboard.queries import machine_device, machine_names
from app.runs.branches import base_channel, is_branch_channel
from app.runs.downsample import downsample_indices
from app.runs.models import Environment, Result, Run
from app.runs.reads import series_levels, series_samples

GROUPINGS = ("config", "precision", "channel")
MAX_POINTS = 400  # per line, after M4 downsampling (steps and extremes are kept)
RANGES = {"7": 7, "30": 30, "90": 90, "all": None}
MAX_MARKS = 50  # annotations drawn on one chart (the newest in its range)
# Points one chart reads, its lines together: "all" of 50 lines of 100,000 points each must
# not read 5 million rows for an anonymous reader. Each line keeps its newest share.
READ_BUDGET = 100_000


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
    branch: str | None = None  # a branch's channel (``<channel>@<branch>``), drawn beside
    project: str | None = None  # that project's series only (None: any project's)


def choices(session: Session, query: SeriesQuery) -> dict[str, list[str]]:
    """What the page's selectors offer, from what is stored."""
    machines = machine_names(session, query.project)
    machine = query.machine or (machines[0] if machines else None)
    in_machine = select(Series.benchmark_id).join(Machine).where(Machine.name == machine)
    metrics = select(Metric.name).join(Series).join(Machine).where(Machine.name == machine)
    channels_of = select(Series.channel).join(Machine).where(Machine.name == machine)
    if query.project is not None:
        in_machine = in_machine.where(Series.project == query.project)
        metrics = metrics.where(Series.project == query.project)
        channels_of = channels_of.where(Series.project == query.project)
    benchmarks = select(Benchmark).where(Benchmark.id.in_(in_machine))
    stored = list(session.scalars(benchmarks))
    channels = set(session.scalars(channels_of))
    return {
        "machine": machines,
        "channel": sorted(c for c in channels if not is_branch_channel(c)),
        "branch": sorted(
            c for c in channels if is_branch_channel(c) and base_channel(c) == query.channel
        ),
        "suite": sorted({b.suite for b in stored}),
        "model": sorted({b.model for b in stored if query.suite in (None, b.suite)}),
        "mode": sorted({b.mode for b in stored}),
        "precision": sorted({b.precision for b in stored}),
        "config": sorted({b.config for b in stored}),
        "metric": sorted(set(session.scalars(metrics.distinct()))),
    }


@dataclass(frozen=True)
class Drawn:
    """The lines of a chart and how many points they hold before and after downsampling."""

    lines: list[Line]
    points: int
    shown: int
    cut: int | None = None  # each line's newest points read, where the range held more


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
    found = matching_series(session, query, machine, model)
    if query.branch and is_branch_channel(query.branch) and query.by != "channel":
        # The branch's points beside the default branch's: the same benchmarks, its channel.
        found += matching_series(session, replace(query, channel=query.branch), machine, model)
    drawn = lines(session, found, query.by, machine_device(session, machine), query.days)
    unit = found[0].metric.unit if found else ""
    drawn_marks = marks(session, machine, found, drawn)
    return context | {
        "series": found,
        "unit": unit,
        "figure": figures.series_chart(
            drawn.lines, query.metric, query.mode, query.by, unit, drawn_marks
        )
        if found
        else None,
        "marks": drawn_marks,
        "sensitivity": _sensitivity(session, found, query.by),
        "regressions": [step for line in drawn.lines for step in line.steps],
        "points": drawn.points,
        "shown": drawn.shown,
        "cut": drawn.cut,
    }


def _sensitivity(session: Session, found: list[Series], by: str) -> list[dict[str, Any]]:
    """Per line with triage labels or a sensitivity of its own: what its triage says."""
    ids = [s.id for s in found]
    records, settings = sensitivity.records(session, ids), sensitivity.settings_of(session, ids)
    rows = []
    for one in found:
        record, setting = records.get(one.id), settings.get(one.id)
        if record is None and setting is None:
            continue
        rows.append(
            {
                "label": _label(one, by),
                "series_id": one.id,
                "words": record.words() if record is not None else "",
                "factor": setting.factor if setting is not None and setting.learning else 1.0,
                "pinned": setting.pinned if setting is not None else None,
                "learning": setting.learning if setting is not None else True,
            }
        )
    return rows


def matching_series(session: Session, query: SeriesQuery, machine: str, model: str) -> list[Series]:
    """The series the query draws, a line each (at most 50), by their line's label."""
    found, _ = search_series(session, _filter(query, machine, model), 0, 50)
    kept = [s for s in found if query.suite in (None, s.benchmark.suite)]
    return sorted(kept, key=lambda s: _label(s, query.by))


def lines(session: Session, found: list[Series], by: str, device: str, days: str) -> Drawn:
    """Each series' points over the range (downsampled) and its steps, as chart lines.

    Args:
        session: the database session.
        found: the series, in legend order.
        by: what tells the lines apart (config, precision or channel).
        device: the machine's device, to name configs as its users do.
        days: the range, a key of ``RANGES``, ending at the newest point.

    Returns:
        The lines, and how many points they hold before and after downsampling.
    """
    since = _since(session, [s.id for s in found], days)
    drawn, total, cut = [], 0, None
    share = max(MAX_POINTS, READ_BUDGET // max(1, len(found)))
    for series in found:
        rows = series_levels(session, series.id, since, None, share + 1, newest=True)
        if len(rows) > share:
            rows, cut = rows[1:], share
        kept = [rows[i] for i in downsample_indices([r.value for r in rows], MAX_POINTS)]
        # The band of the points drawn only, computed by the database: never sample arrays.
        some = [r.run_id for r in kept] if len(kept) < len(rows) or cut else None
        bands = series_samples(session, series.id, some, since, None)
        torch = _torch_versions(session, {r.run_id for r in kept})
        label = _label(series, by)
        drawn.append(
            Line(
                name=fmt.config_label(label, device) if by == "config" else label,
                unit=series.metric.unit,
                points=[
                    Point(
                        at=r.measured_at,
                        value=r.value,
                        status=r.status,
                        low=_band(bands, r.run_id, "samples_min"),
                        high=_band(bands, r.run_id, "samples_max"),
                        run_id=r.run_id,
                        commit=r.commit,
                        torch=torch.get(r.run_id),
                    )
                    for r in kept
                ],
                steps=_steps(session, series, label),
            )
        )
        total += len(rows)
    return Drawn(drawn, total, sum(len(line.points) for line in drawn), cut)


def _band(bands: dict[int, Any], run_id: int, edge: str) -> float | None:
    found = bands.get(run_id)
    value = getattr(found, edge) if found is not None else None
    return None if value is None else float(value)  # SQLite gives a whole sample as an int


def marks(session: Session, machine: str, found: list[Series], drawn: Drawn) -> list[Mark]:
    """The annotations that apply to the chart, within the time its points span.

    Global ones, the machine's, and those of the chart's channels (a branch's channel counts
    as its default branch's too) and projects; at most ``MAX_MARKS``, the newest.
    """
    times = [p.at for line in drawn.lines for p in line.points]
    if not times:
        return []
    channels = {s.channel for s in found} | {base_channel(s.channel) for s in found}
    projects = sorted({s.project for s in found})
    rows = annotations_service.annotations_for(
        session,
        machine,
        sorted(channels),
        projects,
        min(times),
        max(times) + timedelta(seconds=1),
        MAX_MARKS,
    )
    return [Mark(a.id, a.at, a.ends_at, a.text, annotations_service.scope_of(a)) for a in rows]


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
        project=query.project,
    )


def _since(session: Session, series_ids: list[int], days: str) -> datetime | None:
    """The start of the range: that many days before the series' newest point."""
    span = RANGES.get(days, 90)
    newest = session.scalar(
        select(func.max(Result.measured_at)).where(Result.series_id.in_(series_ids))
    )
    return None if span is None or newest is None else newest - timedelta(days=span)


def _label(series: Series, by: str) -> str:
    label = series.channel if by == "channel" else str(getattr(series.benchmark, by))
    if by != "channel" and is_branch_channel(series.channel):
        label = f"{label} @{series.channel.partition('@')[2]}"
    if series.project != DEFAULT_PROJECT:  # two projects' lines of one case stay told apart
        label = f"{label} [{series.project}]"
    return label


def _torch_versions(session: Session, run_ids: set[int]) -> dict[int, str]:
    query = select(Run.id, Environment.torch).join(Environment).where(Run.id.in_(run_ids))
    return {row.id: row.torch for row in session.execute(query)}


def _steps(session: Session, series: Series, label: str) -> list[Step]:
    query = select(Regression, Run.started_at).join(Run, Regression.first_bad_run_id == Run.id)
    found = session.execute(query.where(Regression.series_id == series.id)).all()
    return [
        Step(
            id=regression.id,
            label=label,
            at=at,
            direction=regression.direction,
            rel_change=regression.rel_change,
            before=regression.before,
            after=regression.after,
            status=regression.status,
            group_id=regression.group_id,
            unit=series.metric.unit,
        )
        for regression, at in found
    ]
