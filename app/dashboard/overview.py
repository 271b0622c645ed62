"""The overview: per metric family, a table of configs x (suite, precision), base vs latest."""

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.anomalies import described, triage
from app.anomalies.models import AggregatePoint, CaseFailure
from app.benchmarks.comparison import judge_values, threshold_for
from app.benchmarks.service import list_machines
from app.dashboard import format as fmt
from app.dashboard.figures import sparkline
from app.dashboard.queries import default_channel, machine_channels, recent_runs
from app.runs.models import Run
from app.summaries import aggregates
from app.summaries.aggregates import GroupKey, GroupStats
from app.summaries.service import model_records

TREND_RUNS = 14
BASE_AGE = timedelta(days=7)
CONFIG_ORDER = ("eager", "default", "dynamic", "cudagraphs", "max_autotune")


@dataclass(frozen=True)
class Family:
    """A metric family of the overview: which aggregate, how to show it, which way is good."""

    key: str
    title: str
    unit: str
    higher_is_better: bool
    memory: bool = False


FAMILIES = (
    Family("pass_rate", "Pass rate", "%", True),
    Family("geomean_speedup", "Geomean speedup vs eager", "x", True),
    Family("mean_compile_time_s", "Mean compile time", "s", False),
    Family("mean_compression_ratio", "Memory compression ratio", "x", True, memory=True),
)


@dataclass
class Cell:
    """One config x column cell of a family's table."""

    text: str
    base_text: str
    change: str
    verdict: str
    warning: bool
    trend: str
    title: str
    alert: int | None = None  # the alert group of an open finding on this aggregate


@dataclass
class Table:
    """A family's table: rows are configs, columns are (suite, precision)."""

    family: Family
    columns: list[tuple[str, str]]
    rows: list[tuple[str, list[Cell | None]]] = field(default_factory=list)


def _value(stats: GroupStats | None, family: Family) -> float | None:
    if stats is None:
        return None
    value: float | None = getattr(stats, family.key)
    return value * 100 if value is not None and family.unit == "%" else value


def _base_run(session: Session, latest: Run, base_id: int | None, recent: list[Run]) -> Run:
    if base_id is not None and (chosen := session.get(Run, base_id)) is not None:
        return chosen
    target = latest.started_at - BASE_AGE
    older = [r for r in recent if r.started_at <= target]
    return older[0] if older else recent[-1]


def overview(
    session: Session,
    machine: str | None,
    channel: str | None,
    mode: str,
    base_id: int | None,
    project: str | None = None,
) -> dict[str, Any]:
    """Everything the overview page shows; ``{"machines": []}`` when nothing is stored yet.

    ``project``: that project's runs and findings only (None: every project's).
    """
    machines = list_machines(session, project)
    if not machines:
        return {"machines": []}
    chosen = next((m for m in machines if m.name == machine), machines[0])
    channels = machine_channels(session, chosen.name, project)
    channel = channel if channel in channels else default_channel(channels)
    recent = recent_runs(session, chosen.name, channel, 60, project)
    context: dict[str, Any] = {
        "machines": machines,
        "machine": chosen,
        "channels": channels,
        "channel": channel,
        "mode": mode,
        "recent": recent,
    }
    if not recent:
        return context
    latest, base = recent[0], _base_run(session, recent[0], base_id, recent)
    stats = _stats_by_run(session, [*reversed(recent[:TREND_RUNS]), base])
    alerts = _open_aggregates(session, chosen.name, channel, project)
    context |= {
        "latest": latest,
        "base": base,
        "tables": [
            _table(f, stats, recent[:TREND_RUNS], latest, base, mode, chosen.device, alerts)
            for f in FAMILIES
        ],
        "groups": _open_groups(session, chosen.name, channel, project),
        "failing": _newly_failing(session, chosen.name, channel, project),
    }
    return context


def _stats_by_run(session: Session, runs: list[Run]) -> dict[int, dict[GroupKey, GroupStats]]:
    """Each run's aggregates: the points its detection stored, read for all runs at once.

    A run without points (not detected yet, or detected before points were kept) has them
    computed from its results, as detection would.
    """
    stored = _stored_stats(session, [run.id for run in runs])
    return {
        run.id: stored.get(run.id) or aggregates.summarize(model_records(session, run.id))
        for run in runs
    }


def _stored_stats(session: Session, run_ids: list[int]) -> dict[int, dict[GroupKey, GroupStats]]:
    points: dict[int, dict[GroupKey, dict[str, AggregatePoint]]] = defaultdict(dict)
    for point in session.scalars(select(AggregatePoint).where(AggregatePoint.run_id.in_(run_ids))):
        group = (point.suite, point.config, point.precision, point.mode)
        points[point.run_id].setdefault(group, {})[point.stat] = point
    return {
        run_id: {group: _from_points(stats) for group, stats in sorted(groups.items())}
        for run_id, groups in points.items()
    }


def _from_points(stats: dict[str, AggregatePoint]) -> GroupStats:
    """A group's aggregates as its stored points have them (the pass rate's count: all models)."""
    rate = stats.get("pass_rate")
    total = rate.model_count if rate is not None else 0

    def value(stat: str) -> float | None:
        return stats[stat].value if stat in stats else None

    return GroupStats(
        pass_count=round(rate.value * total) if rate is not None else 0,
        total_count=total,
        pass_rate=rate.value if rate is not None else 0.0,
        geomean_speedup=value("geomean_speedup"),
        mean_compile_time_s=value("mean_compile_time_s"),
        mean_compression_ratio=value("mean_compression_ratio"),
        mean_peak_memory_gb=None,  # not shown on the overview, not kept as points
        mean_abs_latency_ms=None,
    )


def _table(
    family: Family,
    stats: dict[int, dict[GroupKey, GroupStats]],
    trend_runs: list[Run],
    latest: Run,
    base: Run,
    mode: str,
    device: str,
    alerts: dict[tuple[str, ...], int],
) -> Table:
    keys = [k for k in stats[latest.id] if k[3] == mode and k[1] != "eager"]  # vs eager
    columns = sorted({(k[0], k[2]) for k in keys})
    configs = sorted({k[1] for k in keys}, key=_config_order)
    table = Table(family, columns)
    for config in configs:
        cells = [
            _cell(family, stats, trend_runs, latest, base, (suite, config, precision, mode))
            for suite, precision in columns
        ]
        for cell, (suite, precision) in zip(cells, columns, strict=True):
            if cell is not None:
                cell.alert = alerts.get((suite, config, precision, mode, family.key))
        table.rows.append((fmt.config_label(config, device), cells))
    return table


def _config_order(config: str) -> tuple[int, str]:
    known = config in CONFIG_ORDER
    return (CONFIG_ORDER.index(config) if known else len(CONFIG_ORDER), config)


def _cell(
    family: Family,
    stats: dict[int, dict[GroupKey, GroupStats]],
    trend_runs: list[Run],
    latest: Run,
    base: Run,
    key: GroupKey,
) -> Cell | None:
    new_stats = stats[latest.id].get(key)
    if new_stats is None:
        return None
    new, old = _value(new_stats, family), _value(stats[base.id].get(key), family)
    change = judge_values(old, new, family.higher_is_better, threshold_for(family.memory))
    trend = [_value(stats[run.id].get(key), family) for run in reversed(trend_runs)]
    shown = _shown(family, new, new_stats)
    return Cell(
        text=shown,
        base_text=fmt.number(old, family.unit),
        change=fmt.percent(change.rel_change),
        verdict=change.verdict,
        warning=fmt.warning(
            family.key, None if new is None else new / (100 if family.unit == "%" else 1)
        ),
        trend=sparkline(trend),
        title=f"{family.title}: base {fmt.number(old, family.unit)}, latest {shown}",
    )


def _shown(family: Family, value: float | None, stats: GroupStats) -> str:
    text = fmt.number(value, family.unit)
    if family.key == "pass_rate":
        return f"{text} ({stats.pass_count}/{stats.total_count})"
    return text


NEWLY_FAILING = 10  # cases listed on top


def _newly_failing(
    session: Session, machine: str, channel: str, project: str | None
) -> tuple[list[CaseFailure], int]:
    """Its cases that fail now, untriaged, newest first; and how many there are.

    Failing cases only (``failed``, ``accuracy``): a model no longer or newly reported is a
    coverage change, which the alerts page shows, not a failing case.
    """
    where = triage.FailureFilter(
        status="new",
        machine=machine,
        channel=channel,
        open=True,
        severity="high",
        project=project,
    )
    return triage.list_failures(session, where, 0, NEWLY_FAILING)


OPEN_AGGREGATES = 500  # open aggregate findings of a machine and channel read for the tables


def _open_aggregates(
    session: Session, machine: str, channel: str, project: str | None
) -> dict[tuple[str, ...], int]:
    """The alert group of each aggregate's open finding, by (suite, config, ..., stat).

    Open: not recovered, and new or acknowledged; the newest finding's group wins.
    """
    where = triage.AggregateFilter(machine=machine, channel=channel, open=True, project=project)
    found, _ = triage.list_aggregates(session, where, 0, OPEN_AGGREGATES)
    return {
        (f.suite, f.config, f.precision, f.mode, f.stat): f.group_id
        for f in reversed(found)  # newest last, so it wins
        if f.status in ("new", "acknowledged")
    }


def _open_groups(
    session: Session, machine: str, channel: str, project: str | None
) -> list[dict[str, Any]]:
    groups, _ = triage.list_groups(session, "new", machine, channel, None, 0, 10, project)
    return [described.describe_group(session, group) for group in groups]
