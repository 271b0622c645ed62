"""The compare page: config vs config, run vs run, machine vs machine, release lines side by side.

Every kind reduces to sides (a run, and for config comparisons a config within it) whose results
of one metric are matched per case; the first side is the base. Cases, verdicts and geomeans
are ``app.benchmarks.comparison``'s, as ``GET /api/v1/compare`` has them; each side after the
base gets the geomean of its ratio to the base over the cases both measured.
"""

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.anomalies.models import Regression
from app.benchmarks.comparison import (
    RELATIVE,
    CaseKey,
    Geomean,
    case_key,
    geomean_ratio,
    in_order,
    judge_rows,
)
from app.benchmarks.models import CASE_IDENTITY, Series
from app.core import spreadsheet
from app.core.errors import InvalidInput
from app.core.names import is_project_name
from app.dashboard import figures, kernels_page
from app.dashboard.queries import (
    default_channel,
    machine_channels,
    machine_device,
    machine_names,
    recent_runs,
)
from app.dashboard.shell import as_int
from app.runs.history import place_runs
from app.runs.models import Run
from app.runs.reads import get_run
from app.suite_runs import compare_reruns
from app.summaries import confidence
from app.summaries.service import compared_results

KINDS = ("configs", "runs", "machines", "channels")
MAX_SIDES = 8  # each side reads a whole run's results (their values, not their samples)
MAX_DISTRIBUTIONS = 6  # bimodal cases drawn with their samples
MAX_RERUN_CASES = compare_reruns.MAX_CASES


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
    project: str | None = None  # that project's runs only (None: any project's)


def query_of(params: Mapping[str, str]) -> CompareQuery:
    """The page's state from its URL's parameters; a malformed one takes its default."""

    def text(name: str, default: str | None = None) -> str | None:
        return params.get(name) or default

    project = params.get("project") or None
    kind = params.get("kind", "configs")
    return CompareQuery(
        kind if kind in KINDS else "configs",
        text("machine"),
        text("channel"),
        params.get("metric", "latency"),
        params.get("mode", "inference"),
        params.get("base_config", "default"),
        params.get("new_config", "dynamic"),
        as_int(params.get("base_run")),
        as_int(params.get("new_run")),
        text("base_machine"),
        text("new_machine"),
        params.get("channels", ""),
        project if project is not None and is_project_name(project) else None,
    )


@dataclass(frozen=True)
class Side:
    """One side of a comparison: a run, narrowed to one config for config comparisons."""

    label: str
    run: Run
    config: str | None = None


@dataclass(frozen=True)
class Choices:
    """What the page's selectors offer: the machines, the one shown and its channels."""

    machines: list[str]
    machine: str | None
    channels: list[str]


@dataclass(frozen=True)
class Table:
    """The comparison: its sides (base first), a row per case, a geomean per side after the base.

    ``intervals``: each geomean's bootstrap interval (None without samples to draw from);
    ``judged``: how many cases the statistics cover (``confidence.MAX_CASES`` at most).
    """

    sides: list[Side]
    rows: list[dict[str, Any]] = field(default_factory=list)
    geomeans: list[Geomean] = field(default_factory=list)
    intervals: list[tuple[float, float] | None] = field(default_factory=list)
    judged: int = 0

    @property
    def common(self) -> int:
        """How many cases every side measured."""
        return sum(all(v is not None for v in r["values"]) for r in self.rows)

    @property
    def unit(self) -> str:
        """The metric's unit, as the cases give it."""
        return next((r["unit"] for r in self.rows if r["unit"]), "")


def choices(session: Session, query: CompareQuery) -> Choices:
    """The machines, the one the query names (else the first) and that machine's channels."""
    machines = machine_names(session, query.project)
    machine = query.machine or (machines[0] if machines else None)
    channels = machine_channels(session, machine, query.project) if machine else []
    return Choices(machines, machine, channels)


def sides(session: Session, query: CompareQuery, offered: Choices) -> list[Side]:
    """The sides a query names (base first); empty when there is nothing to compare yet."""
    machine = offered.machine
    if machine is None:
        return []
    channel = query.channel or default_channel(offered.channels)
    project = query.project
    if query.kind == "runs":
        latest = recent_runs(session, machine, channel, 2, project)
        base_id = query.base_run or (latest[-1].id if latest else None)
        new_id = query.new_run or (latest[0].id if latest else None)
        if base_id is None or new_id is None:
            return []
        return [
            Side(f"run {base_id}", get_run(session, base_id)),
            Side(f"run {new_id}", get_run(session, new_id)),
        ]
    if query.kind == "machines":
        other = next((m for m in offered.machines if m != machine), machine)
        names = [query.base_machine or machine, query.new_machine or other]
        return [Side(n, r[0]) for n in names if (r := recent_runs(session, n, channel, 1, project))]
    if query.kind == "channels":
        wanted = _channels(query.channels) or offered.channels[:MAX_SIDES]
        return [
            Side(c, r[0]) for c in wanted if (r := recent_runs(session, machine, c, 1, project))
        ]
    latest = recent_runs(session, machine, channel, 1, project)
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


def table(session: Session, query: CompareQuery, chosen: list[Side], stats: bool = True) -> Table:
    """Each side's results of the query's metric and mode, matched per case and judged.

    ``stats``: how sure each change is, from the samples (the CSV reads values alone).
    """
    if len(chosen) < 2:
        return Table(chosen)
    results = [_results(session, side, query) for side in chosen]
    keys = in_order(set().union(*results))
    rows = [_row(key, results) for key in keys]
    higher = next((r["higher_is_better"] for r in rows if r["higher_is_better"] is not None), None)
    geomeans = [
        geomean_ratio(((r["values"][0], r["values"][i]) for r in rows), higher)
        for i in range(1, len(chosen))
    ]
    if not stats:
        return Table(chosen, rows, geomeans)
    judged = keys[: confidence.MAX_CASES]
    samples = [
        confidence.read_side(session, side.run.id, [r for k in judged if (r := found.get(k))])
        for side, found in zip(chosen, results, strict=True)
    ]
    intervals = []
    for i in range(1, len(chosen)):
        pairs = [
            (confidence.key_of(base), confidence.key_of(new), new["higher_is_better"])
            for k in judged
            if (base := results[0].get(k)) is not None and (new := results[i].get(k)) is not None
        ]
        intervals.append(confidence.geomean(samples[0], samples[i], pairs))
        judgements = iter(confidence.judge(samples[0], samples[i], pairs, RELATIVE))
        for key, row in zip(judged, rows, strict=False):
            both = results[0].get(key) is not None and results[i].get(key) is not None
            row["confidence"].append(next(judgements) if both else None)
    for key, row in zip(judged, rows, strict=False):
        row["samples"] = [
            side.samples.get(confidence.key_of(found[key])) if key in found else None
            for side, found in zip(samples, results, strict=True)
        ]
    return Table(chosen, rows, geomeans, intervals, len(judged))


def _results(session: Session, side: Side, query: CompareQuery) -> dict[CaseKey, dict[str, Any]]:
    """The side's result of the metric per case (keyed as ``GET /api/v1/compare`` keys them)."""
    return {
        case_key(row, config=side.config is None): row
        for row in compared_results(session, side.run.id)  # values only: never samples
        if row["metric"] == query.metric
        and row["mode"] == query.mode
        and side.config in (None, row["config"])
    }


def _row(key: CaseKey, results: list[dict[CaseKey, dict[str, Any]]]) -> dict[str, Any]:
    present = [side.get(key) for side in results]
    ident = next(r for r in present if r is not None)
    changes = [judge_rows(present[0], r) for r in present[1:]]
    return {
        "model": ident["model"],
        "suite": ident["suite"],
        "precision": ident["precision"],
        "config": key[0].config,  # empty when each side fixes its own
        "batch_size": ident["batch_size"],
        "params": ident["params"],
        "unit": ident["unit"],
        "higher_is_better": ident["higher_is_better"],
        "values": [r["value"] if r is not None and r["status"] == "ok" else None for r in present],
        "texts": [r["text_value"] if r is not None else None for r in present],
        "changes": [c.rel_change for c in changes],
        "verdicts": [c.verdict for c in changes],
        "benchmarks": [r["benchmark_id"] if r is not None else None for r in present],
        "identities": [_identity(r) if r is not None else None for r in present],
        "confidence": [],  # per side after the base, for the cases the statistics cover
        "samples": [],
    }


def _identity(row: dict[str, Any]) -> dict[str, Any]:
    """The case a result row is of (``CASE_IDENTITY``), as a re-run asks for it."""
    return {name: row[name] for name in CASE_IDENTITY}


def compare_page(session: Session, query: CompareQuery) -> dict[str, Any]:
    """Everything the page shows: selectors, sides, table, geomeans, scatter, rollback targets."""
    offered = choices(session, query)
    compared = table(session, query, sides(session, query, offered))
    context: dict[str, Any] = {
        "query": query,
        "kinds": KINDS,
        "machines": offered.machines,
        "machine": offered.machine,
        "channels_of_machine": offered.channels,
        "device": machine_device(session, offered.machine),
        "sides": compared.sides,
    }
    if len(compared.sides) < 2:
        return context
    return context | {
        "rows": compared.rows,
        "geomeans": compared.geomeans,
        "common": compared.common,
        "scatter": figures.compare_scatter(
            [side.label for side in compared.sides],
            [r["values"] for r in compared.rows],
            [f"{r['model']} {r['precision']} {r['config']}" for r in compared.rows],
            query.metric,
            compared.unit,
        ),
        "rollback": _rollback_targets(session, compared.sides),
        "kernel_links": _kernel_links(session, compared),
        "intervals": compared.intervals,
        "judged": compared.judged,
        "undecided": undecided(compared),
        "distributions": _distributions(compared, query.metric),
    }


def undecided(compared: Table) -> dict[str, Any]:
    """The cases that need more runs, as one re-run asks for them: per run, their identities.

    The largest changes first, at most ``compare_reruns.MAX_CASES`` cases a run (a config
    comparison's row is two cases of one run); ``count``: how many need more runs in all,
    ``cases``: the rows the re-run covers.
    """
    needing = []
    for row in compared.rows:
        unsure = [c for c in row["confidence"] if c is not None and c.needs_more]
        if unsure:
            needing.append((max(abs(c.ratio - 1) for c in unsure), row))
    needing.sort(key=lambda pair: -pair[0])
    runs: dict[int, list[dict[str, Any]]] = {}
    chosen = 0
    for _, row in needing:
        wanted = [
            (side.run.id, identity)
            for side, identity in zip(compared.sides, row["identities"], strict=True)
            if identity is not None
        ]
        after = {run_id: len(runs.get(run_id, [])) for run_id, _ in wanted}
        for run_id, identity in wanted:
            after[run_id] += identity not in runs.get(run_id, [])
        if any(n > MAX_RERUN_CASES for n in after.values()):
            break  # a run's re-run is full (two configs of one run take two cases a row)
        for run_id, identity in wanted:
            if identity not in runs.setdefault(run_id, []):
                runs[run_id].append(identity)
        chosen += 1
    return {"count": len(needing), "runs": runs, "cases": chosen}


def _distributions(compared: Table, metric: str) -> list[dict[str, Any]]:
    """The samples of the cases with two modes on a side, both sides on one chart each."""
    charts = []
    for index, row in enumerate(compared.rows[: compared.judged]):
        if not any(c is not None and c.bimodal for c in row["confidence"]):
            continue
        title = f"{row['model']} · {row['precision']} · {row['config'] or 'config'}"
        labels = [side.label for side in compared.sides]
        figure = figures.distributions(labels, row["samples"], metric, title, row["unit"])
        charts.append({"id": f"samples-{index}", "title": title, "figure": figure})
        if len(charts) == MAX_DISTRIBUTIONS:
            break
    return charts


def _kernel_links(session: Session, compared: Table) -> dict[int, str]:
    """Per row (by index), the kernel diff of its case where both sides profiled it.

    Two sides only (runs, or two configs of one run): a row's case on the first against the
    second. One statement for the page's rows.
    """
    if len(compared.sides) != 2:
        return {}
    base, head = (side.run.id for side in compared.sides)
    pairs = [
        (i, row["benchmarks"][0], row["benchmarks"][1])
        for i, row in enumerate(compared.rows)
        if None not in row["benchmarks"]
    ]
    wanted = {(base, b) for _, b, _ in pairs} | {(head, h) for _, _, h in pairs}
    held = kernels_page.profiled(session, wanted)
    return {
        i: f"/kernels?base_run={base}&head_run={head}&benchmark={b}"
        + (f"&head_benchmark={h}" if h != b else "")
        for i, b, h in pairs
        if (base, b) in held and (head, h) in held
    }


def _rollback_targets(session: Session, chosen: list[Side]) -> list[dict[str, Any]]:
    """Per machine and channel: the newest run before any open regression's first bad run."""
    targets = []
    lines = {(s.run.machine_id, s.run.channel, s.run.project) for s in chosen}
    for machine_id, channel, project in sorted(lines):
        open_since = session.scalar(
            select(Run.started_at)
            .join(Regression, Regression.first_bad_run_id == Run.id)
            .join(Series, Regression.series_id == Series.id)
            .where(Series.machine_id == machine_id, Series.channel == channel)
            .where(Series.project == project)
            .where(Regression.status == "new", Regression.direction == "regression")
            .order_by(Run.started_at)
            .limit(1)
        )
        # The newest run of the place before the first open step: never an invalidated one.
        query = place_runs(machine_id, channel, project, newest_first=True, limit=1)
        if open_since is not None:
            query = query.where(Run.started_at < open_since)
        good = session.scalar(query)
        if good is not None:
            targets.append({"run": good, "open_regressions": open_since is not None})
    return targets


def csv_page(session: Session, query: CompareQuery) -> str:
    """The comparison table as CSV: one line per case, a value and change per side."""
    chosen = sides(session, query, choices(session, query))
    compared = table(session, query, chosen, stats=False)
    labels = [side.label for side in compared.sides]
    header = ["suite", "model", "precision", "config", "batch_size", "params", *labels] + [
        f"change {label}" for label in labels[1:]
    ]
    rows = [
        [row["suite"], row["model"], row["precision"], row["config"], row["batch_size"]]
        + [json.dumps(row["params"])]
        + ["" if v is None else v for v in row["values"]]
        + ["" if c is None else f"{c:.6f}" for c in row["changes"]]
        for row in compared.rows
    ]
    return spreadsheet.to_csv([header, *rows])
