"""Summaries per suite x config x precision and run-vs-run comparisons, at query time."""

from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import Text, cast, func, select
from sqlalchemy.orm import Session

from app.benchmarks import comparison
from app.benchmarks.models import Benchmark, CompilerConfig, Machine, Metric, Series
from app.core.errors import InvalidInput, NotFound
from app.runs.history import place_runs
from app.runs.models import Result, Run
from app.runs.reads import get_run
from app.summaries import aggregates, confidence
from app.summaries.aggregates import ModelRecord

SUMMARY_METRICS = (
    "speedup",
    "accuracy",
    "compilation_latency",
    "compression_ratio",
    "dynamo_peak_mem",
    "abs_latency",
)


class NoRuns(NotFound):
    """The machine has no run to summarise."""


def latest_run(
    session: Session, machine: str, channel: str | None, project: str | None = None
) -> Run:
    """The newest run of a machine (on a channel and of a project, if given)."""
    machine_id = select(Machine.id).where(Machine.name == machine).scalar_subquery()
    newest = place_runs(machine_id, channel, project, newest_first=True, limit=1)
    run: Run | None = session.scalar(newest)
    if run is None:
        raise NoRuns(
            f"machine {machine!r} has no runs"
            + (f" on channel {channel!r}" if channel else "")
            + (f" of project {project!r}" if project else "")
        )
    return run


def model_records(session: Session, run_id: int) -> list[ModelRecord]:
    """One record per benchmark of a run, pivoting the dashboard's metrics."""
    query = (
        select(
            Benchmark.id,
            Benchmark.suite,
            CompilerConfig.name,
            Benchmark.precision,
            Benchmark.mode,
            Benchmark.model,
            Metric.name,
            Result.status,
            Result.value,
            Result.text_value,
        )
        .join(Series, Result.series_id == Series.id)
        .join(Benchmark, Series.benchmark_id == Benchmark.id)
        .join(CompilerConfig, Benchmark.compiler_config_id == CompilerConfig.id)
        .join(Metric, Series.metric_id == Metric.id)
        .where(Result.run_id == run_id, Metric.name.in_(SUMMARY_METRICS))
    )
    records: dict[int, ModelRecord] = {}
    for bid, suite, config, precision, mode, model, metric, status, value, text in session.execute(
        query
    ):
        record = records.setdefault(bid, ModelRecord(suite, config, precision, mode, model))
        if metric == "accuracy":
            record.accuracy = text if status == "ok" else (text or "fail_to_run")
        elif metric == "speedup":
            record.speedup = value if status == "ok" and value is not None else 0.0
        elif status == "ok":
            setattr(record, metric, value)
    return list(records.values())


def summarize_runs(
    session: Session, run: Run, base: Run | None, common_only: bool
) -> list[dict[str, Any]]:
    """Per group: the new run's aggregates and, with a base run, the base's."""
    new_records = model_records(session, run.id)
    base_records = model_records(session, base.id) if base is not None else []
    if common_only and base is not None:
        new_records, base_records = aggregates.common_only(new_records, base_records)
    new_stats = aggregates.summarize(new_records)
    base_stats = aggregates.summarize(base_records)
    return [
        {
            "suite": k[0],
            "config": k[1],
            "precision": k[2],
            "mode": k[3],
            "new": new_stats.get(k),
            "base": base_stats.get(k),
        }
        for k in sorted(new_stats.keys() | base_stats.keys())
    ]


@dataclass(frozen=True)
class CompareFilter:
    """Narrow a comparison; None means any."""

    suite: str | None = None
    config: str | None = None
    precision: str | None = None
    mode: str | None = None
    metric: str | None = None


@dataclass(frozen=True)
class Compared:
    """A comparison's rows and, with statistics, the geomean of its ratios with its interval."""

    rows: list[dict[str, Any]]
    geomean: comparison.Geomean | None = None
    interval: tuple[float, float] | None = None


def compare_runs(
    session: Session,
    base_id: int,
    new_id: int,
    where: CompareFilter,
    threshold: float,
    stats: bool = False,
    configs: tuple[str, str] | None = None,
) -> Compared:
    """Every benchmark x metric of either run, with base, new, relative change and verdict.

    Each row's ``weight`` is about the bytes of its unbounded text (the case's ``params`` as
    stored), measured by the database, so a page can be cut by bytes before it is shipped.
    With ``stats`` (one metric, at most ``confidence.MAX_CASES`` cases: a 422 otherwise), each
    row also says how sure its change is (``confidence``), and the geomean has its interval.
    ``configs``: a config of the base run against one of the new run (the same run, for config
    against config): the cases are matched without their config.
    """
    if not 0 <= threshold < 1:
        raise InvalidInput("threshold is a fraction in [0, 1), e.g. 0.05 for 5%")
    if configs is None:
        base_rows = _rows_by_case(session, base_id, where)
        new_rows = _rows_by_case(session, new_id, where)
    else:
        base_rows = _rows_by_case(session, base_id, replace(where, config=configs[0]), False)
        new_rows = _rows_by_case(session, new_id, replace(where, config=configs[1]), False)
    keys = comparison.in_order(base_rows.keys() | new_rows.keys())
    rows = [_compared_row(base_rows.get(key), new_rows.get(key), threshold) for key in keys]
    if not stats:
        return Compared(rows)
    _check_stats(where, len(keys))
    both = [k for k in keys if k in base_rows and k in new_rows]
    base = confidence.read_side(session, base_id, [base_rows[k] for k in both])
    new = confidence.read_side(session, new_id, [new_rows[k] for k in both])
    named = [
        (
            confidence.key_of(base_rows[k]),
            confidence.key_of(new_rows[k]),
            new_rows[k]["higher_is_better"],
        )
        for k in both
    ]
    judged = dict(zip(both, confidence.judge(base, new, named, threshold), strict=True))
    for key, row in zip(keys, rows, strict=True):
        row["confidence"] = judged.get(key)
    higher = next((higher for _, _, higher in named), None)
    values = ((base_rows[k]["value"], new_rows[k]["value"]) for k in both)
    return Compared(
        rows, comparison.geomean_ratio(values, higher), confidence.geomean(base, new, named)
    )


def _check_stats(where: CompareFilter, cases: int) -> None:
    """Statistics are of one metric over a bounded number of cases: a 422 at the cause."""
    if where.metric is None:
        raise InvalidInput(
            "statistics compare one metric: give metric (e.g. latency)",
            errors=[{"loc": "query.metric", "field": "metric", "message": "required with stats"}],
        )
    if cases > confidence.MAX_CASES:
        raise InvalidInput(
            f"{cases} cases: statistics cover at most {confidence.MAX_CASES}; narrow the "
            "comparison (suite, config, precision, mode)",
            errors=[{"loc": "query.stats", "field": "stats", "message": "too many cases"}],
        )


def _compared_row(
    base: dict[str, Any] | None, new: dict[str, Any] | None, threshold: float
) -> dict[str, Any]:
    """One row of a run comparison: the case, both sides and its verdict."""
    ident = new or base
    assert ident is not None
    change = comparison.judge_rows(base, new, threshold)
    return {
        **{
            f: ident[f]
            for f in (
                "suite",
                "model",
                "mode",
                "precision",
                "config",
                "batch_size",
                "params",
                "metric",
                "unit",
                "higher_is_better",
            )
        },
        "base_value": base and base["value"],
        "new_value": new and new["value"],
        "base_status": base and base["status"],
        "new_status": new and new["status"],
        "base_text": base and base["text_value"],
        "new_text": new and new["text_value"],
        "rel_change": change.rel_change,
        "verdict": change.verdict,
        "weight": ident["weight"],
    }


def _rows_by_case(
    session: Session, run_id: int, where: CompareFilter, config: bool = True
) -> dict[comparison.CaseKey, dict[str, Any]]:
    """The run's rows ``where`` picks, by case (``config``: the config is part of the case)."""
    get_run(session, run_id)
    wanted = {k: v for k, v in vars(where).items() if v is not None}
    return {
        comparison.case_key(r, config=config): r
        for r in compared_results(session, run_id)
        if all(r[k] == v for k, v in wanted.items())
    }


def compared_results(session: Session, run_id: int) -> list[dict[str, Any]]:
    """A run's results with what a comparison reads: never the raw samples nor ``extra``.

    A run's samples may weigh tens of megabytes; a comparison judges values alone. ``weight``
    is the length of the stored ``params`` (a length, not a parse): the one column of a row
    whose size the schema does not bound.
    """
    query = (
        select(
            Benchmark.id.label("benchmark_id"),
            Series.id.label("series_id"),
            Benchmark.suite,
            Benchmark.model,
            Benchmark.category,
            Benchmark.mode,
            Benchmark.precision,
            CompilerConfig.name.label("config"),
            Benchmark.batch_size,
            Benchmark.params,
            Metric.name.label("metric"),
            Metric.unit,
            Metric.higher_is_better,
            Result.status,
            Result.value,
            Result.text_value,
            func.coalesce(func.length(cast(Benchmark.params, Text)), 0).label("weight"),
        )
        .join(Series, Result.series_id == Series.id)
        .join(Benchmark, Series.benchmark_id == Benchmark.id)
        .join(CompilerConfig, Benchmark.compiler_config_id == CompilerConfig.id)
        .join(Metric, Series.metric_id == Metric.id)
        .where(Result.run_id == run_id)
    )
    return [dict(row._mapping) for row in session.execute(query)]
