"""Read runs back: the listing, one run and its results, and a series' points over time."""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy import ColumnElement, Float, Select, Text, cast, func, literal, select
from sqlalchemy.orm import Session

from app.benchmarks.models import Benchmark, CompilerConfig, Machine, Metric, Series
from app.core.bounds import in_id_range
from app.core.errors import NotFound
from app.runs.models import Result, Run


class RunNotFound(NotFound):
    """No run with this id."""

    def __init__(self, run_id: int) -> None:
        super().__init__(f"run {run_id} does not exist")


@dataclass(frozen=True)
class RunFilter:
    """Filters of the run listing; None means any."""

    machine: str | None = None
    channel: str | None = None
    trigger: str | None = None
    tier: str | None = None
    branch: str | None = None
    commit: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    project: str | None = None


def list_runs(
    session: Session, where: RunFilter, after: tuple[datetime, int] | None, limit: int
) -> list[Run]:
    """Runs newest first, starting after the keyset ``after`` (started_at, id)."""
    query = select(Run)
    if where.machine is not None:
        query = query.join(Machine).where(Machine.name == where.machine)
    for column, wanted in (
        (Run.channel, where.channel),
        (Run.trigger, where.trigger),
        (Run.tier, where.tier),
        (Run.branch, where.branch),
        (Run.commit, where.commit),
        (Run.project, where.project),
    ):
        if wanted is not None:
            query = query.where(column == wanted)
    if where.since is not None:
        query = query.where(Run.started_at >= where.since)
    if where.until is not None:
        query = query.where(Run.started_at < where.until)
    if after is not None:
        at, run_id = after
        query = query.where((Run.started_at < at) | ((Run.started_at == at) & (Run.id < run_id)))
    query = query.order_by(Run.started_at.desc(), Run.id.desc()).limit(limit)
    return list(session.scalars(query))


def list_projects(
    session: Session, machine_id: int | None = None, channel: str | None = None
) -> list[str]:
    """Every project that holds a run (on this machine and channel, if given), by name."""
    query = select(Run.project)
    if machine_id is not None:
        query = query.where(Run.machine_id == machine_id)
    if channel is not None:
        query = query.where(Run.channel == channel)
    return list(session.scalars(query.distinct().order_by(Run.project)))


def get_run(session: Session, run_id: int) -> Run:
    """One run by id (an id no row can have is not looked up: it would fail as a parameter)."""
    if not in_id_range(run_id) or (run := session.get(Run, run_id)) is None:
        raise RunNotFound(run_id)
    return run


def list_run_results(
    session: Session,
    run_id: int,
    *,
    offset: int = 0,
    limit: int | None = None,
    samples: bool = True,
) -> list[dict[str, Any]]:
    """The results of a run with the fields that identify its series, ordered by case.

    ``offset`` and ``limit`` give a part of them: a run's results never change once stored.
    Without ``samples``, each row's ``samples`` is None and ``samples_count``, ``samples_min``
    and ``samples_max`` summarise them, computed by the database: a result's samples may
    weigh megabytes, their summary a few bytes.
    """
    if samples:
        sampled: tuple[Any, ...] = (Result.samples,)
    else:
        count, low, high = samples_summary(session)
        sampled = (
            sa.null().label("samples"),
            count.label("samples_count"),
            low.label("samples_min"),
            high.label("samples_max"),
        )
    query = (
        select(
            Result.series_id,
            Series.benchmark_id,
            Series.metric_id,
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
            Metric.kind,
            Metric.higher_is_better,
            Result.status,
            Result.value,
            *sampled,
            Result.text_value,
            Result.reason,
            Result.extra,
        )
        .join(Series, Result.series_id == Series.id)
        .join(Benchmark, Series.benchmark_id == Benchmark.id)
        .join(CompilerConfig, Benchmark.compiler_config_id == CompilerConfig.id)
        .join(Metric, Series.metric_id == Metric.id)
        .where(Result.run_id == run_id)
        .order_by(*_RESULT_ORDER)
        .offset(offset)
        .limit(limit)
    )
    return [dict(row._mapping) for row in session.execute(query)]


# A run's results in case order: every page of them is cut from this one order.
_RESULT_ORDER = (Benchmark.suite, Benchmark.model, Benchmark.id, Metric.name)


def run_result_weights(session: Session, run_id: int, *, offset: int, limit: int) -> list[int]:
    """About how many bytes each of these results costs an answer, in case order.

    Its ``extra``, ``reason`` and stored samples as text, measured by the database (a length,
    not a parse), so a page can be cut by bytes before it is read. Without ``samples`` the
    arrays count all the same: the database parses them to summarise them (SQLite's json_each
    takes about as long as shipping them).
    """
    stored = func.coalesce(func.length(cast(Result.samples, Text)), 0)
    weight = func.coalesce(func.length(cast(Result.extra, Text)), 0) + func.length(Result.reason)
    weight = weight + stored
    query = (
        select(weight)
        .join(Series, Result.series_id == Series.id)
        .join(Benchmark, Series.benchmark_id == Benchmark.id)
        .join(Metric, Series.metric_id == Metric.id)
        .where(Result.run_id == run_id)
        .order_by(*_RESULT_ORDER)
        .offset(offset)
        .limit(limit)
    )
    return [int(w or 0) for w in session.scalars(query)]


def samples_summary(
    session: Session,
) -> tuple[ColumnElement[Any], ColumnElement[Any], ColumnElement[Any]]:
    """SQL for the count, lowest and highest of ``Result.samples``, row by row.

    What a band or a summary needs, computed where the array is stored: loading the arrays
    into Python costs their megabytes. NULL where a result has no samples.
    """
    count: ColumnElement[Any]
    number: ColumnElement[Any]
    if session.get_bind().dialect.name == "postgresql":
        # A result without samples may hold JSON null: only an array has elements.
        is_array = func.json_typeof(Result.samples) == "array"
        array = sa.case((is_array, Result.samples), else_=cast(literal("[]"), Result.samples.type))
        count = sa.case((is_array, func.json_array_length(Result.samples)), else_=None)
        element = func.json_array_elements_text(array).table_valued("value")
        number = cast(element.c.value, Float)
    else:
        count = func.nullif(func.json_array_length(Result.samples), 0)
        element = func.json_each(Result.samples).table_valued("value")
        number = element.c.value
    low = select(func.min(number)).select_from(element).scalar_subquery()
    high = select(func.max(number)).select_from(element).scalar_subquery()
    return count, low, high


def series_points(
    session: Session,
    series_id: int,
    since: datetime | None,
    until: datetime | None,
    limit: int | None = None,
    *,
    samples: bool = False,
) -> Sequence[Any]:
    """A series' results in a time range with their run's commit, oldest first.

    At most ``limit`` of them, the oldest, if given. Each row has ``samples_min`` and
    ``samples_max`` (what a band draws, computed by the database), and its raw ``samples``
    only when asked.
    """
    query = _points_query(series_id, since, until, *_band(session, samples))
    return session.execute(query.limit(limit)).all()


def _band(session: Session, samples: bool) -> tuple[Any, ...]:
    _, low, high = samples_summary(session)
    band = (low.label("samples_min"), high.label("samples_max"))
    return (*band, Result.samples) if samples else band


def series_levels(
    session: Session,
    series_id: int,
    since: datetime | None,
    until: datetime | None,
    limit: int | None,
    *,
    newest: bool = False,
) -> Sequence[Any]:
    """At most ``limit`` (None: all) of a series' points in a time range, oldest first.

    The oldest ``limit`` of the range, or with ``newest`` the newest ones (still returned
    oldest first). Without samples: the rows a chart draws, without the arrays a point's
    samples may hold.
    """
    query = _points_query(series_id, since, until)
    if not newest:
        return session.execute(query.limit(limit)).all()
    latest = query.order_by(None).order_by(Result.measured_at.desc(), Result.run_id.desc())
    return session.execute(latest.limit(limit)).all()[::-1]


def _points_query(
    series_id: int, since: datetime | None, until: datetime | None, *extra: Any
) -> Select[Any]:
    columns = (Result.run_id, Result.measured_at, Result.status, Result.value, Result.text_value)
    query = (
        select(*columns, Run.commit, *extra)
        .join(Run, Result.run_id == Run.id)
        .where(Result.series_id == series_id)
    )
    if since is not None:
        query = query.where(Result.measured_at >= since)
    if until is not None:
        query = query.where(Result.measured_at < until)
    return query.order_by(Result.measured_at, Result.run_id)


def series_samples(
    session: Session,
    series_id: int,
    run_ids: list[int] | None,
    since: datetime | None,
    until: datetime | None,
    *,
    samples: bool = False,
) -> dict[int, Any]:
    """The band (``samples_min``, ``samples_max``) of a series' points, by run id.

    With their raw ``samples`` too when asked; of these runs, or (None) of the whole range.
    """
    query = select(Result.run_id, *_band(session, samples)).where(Result.series_id == series_id)
    if run_ids is None:
        if since is not None:
            query = query.where(Result.measured_at >= since)
        if until is not None:
            query = query.where(Result.measured_at < until)
        return {row.run_id: row for row in session.execute(query)}
    found: dict[int, Any] = {}
    for start in range(0, len(run_ids), 1000):  # bound parameters per statement
        chunk = run_ids[start : start + 1000]
        rows = session.execute(query.where(Result.run_id.in_(chunk)))
        found.update({row.run_id: row for row in rows})
    return found
