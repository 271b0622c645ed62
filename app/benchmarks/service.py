"""The catalog: find or create machines, configs, metrics, benchmarks and series; search them."""

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from app.benchmarks import vocabulary as vocab
from app.benchmarks.models import Benchmark, CompilerConfig, Machine, Metric, Series
from app.core.errors import NotFound
from app.core.pagination import count_and_page


class SeriesNotFound(NotFound):
    """No series with this id."""

    def __init__(self, series_id: int) -> None:
        super().__init__(f"series {series_id} does not exist")


class BenchmarkKey(NamedTuple):
    """What identifies a benchmark case (category is descriptive, not identifying)."""

    suite: str
    model: str
    mode: str
    precision: str
    config: str
    batch_size: int | None
    params_json: str  # canonical JSON of the extra parameters ("{}" for none)

    @classmethod
    def of_row(cls, row: Mapping[str, Any]) -> "BenchmarkKey":
        """The key of a result row (``runs.reads.list_run_results``)."""
        return cls(
            row["suite"],
            row["model"],
            row["mode"],
            row["precision"],
            row["config"],
            row["batch_size"],
            cls.params_to_json(row["params"]),
        )

    @classmethod
    def of_benchmark(cls, benchmark: Benchmark) -> "BenchmarkKey":
        """The key of a stored benchmark."""
        return cls(
            benchmark.suite,
            benchmark.model,
            benchmark.mode,
            benchmark.precision,
            benchmark.config,
            benchmark.batch_size,
            cls.params_to_json(benchmark.params),
        )

    @staticmethod
    def params_to_json(params: dict[str, Any]) -> str:
        """Canonical JSON of a params dict: equal dicts give equal text."""
        return json.dumps(params, sort_keys=True, separators=(",", ":")) if params else "{}"

    @property
    def fingerprint(self) -> str:
        """A stable hash of the identifying fields (the benchmark table's unique key)."""
        return hashlib.sha256(json.dumps(list(self)).encode()).hexdigest()


def list_machines(session: Session, project: str | None = None) -> list[Machine]:
    """Every machine (with a series of ``project``, if given), by name.

    Machines are shared by every project.
    """
    query = select(Machine).order_by(Machine.name)
    if project is not None:
        of_project = select(Series.id).where(
            Series.machine_id == Machine.id, Series.project == project
        )
        query = query.where(of_project.exists())
    return list(session.scalars(query))


@dataclass(frozen=True)
class SeriesFilter:
    """Any combination of what identifies a series; None means any."""

    suite: str | None = None
    model: str | None = None
    category: str | None = None
    mode: str | None = None
    precision: str | None = None
    config: str | None = None
    metric: str | None = None
    machine: str | None = None
    channel: str | None = None
    project: str | None = None


def _benchmark_conditions(query: Select[Any], where: SeriesFilter) -> Select[Any]:
    for column, wanted in (
        (Benchmark.suite, where.suite),
        (Benchmark.model, where.model),
        (Benchmark.category, where.category),
        (Benchmark.mode, where.mode),
    ):
        if wanted is not None:
            query = query.where(column == wanted)
    if where.precision is not None:
        query = query.where(
            Benchmark.precision == (vocab.canonical_precision(where.precision) or where.precision)
        )
    if where.config is not None:
        query = query.join(CompilerConfig, Benchmark.compiler_config_id == CompilerConfig.id)
        query = query.where(CompilerConfig.name == vocab.canonical_config(where.config))
    return query


def list_benchmarks(
    session: Session, where: SeriesFilter, offset: int, limit: int
) -> tuple[list[Benchmark], int]:
    """A page of benchmarks matching the filter, and how many match in all."""
    query = _benchmark_conditions(select(Benchmark), where)
    if where.project is not None:
        in_project = select(Series.id).where(
            Series.benchmark_id == Benchmark.id, Series.project == where.project
        )
        query = query.where(in_project.exists())
    order = [Benchmark.suite, Benchmark.model, Benchmark.id]
    return count_and_page(session, query, order, offset, limit)


def search_series(
    session: Session, where: SeriesFilter, offset: int, limit: int
) -> tuple[list[Series], int]:
    """A page of series matching the filter, and how many match in all."""
    query = _benchmark_conditions(select(Series).join(Benchmark), where)
    if where.metric is not None:
        query = query.join(Metric).where(Metric.name == vocab.canonical_metric(where.metric))
    if where.machine is not None:
        query = query.join(Machine).where(Machine.name == where.machine)
    if where.channel is not None:
        query = query.where(Series.channel == where.channel)
    if where.project is not None:
        query = query.where(Series.project == where.project)
    order = [Benchmark.suite, Benchmark.model, Series.id]
    return count_and_page(session, query, order, offset, limit)


def get_series(session: Session, series_id: int) -> Series:
    """One series by id."""
    if (series := session.get(Series, series_id)) is None:
        raise SeriesNotFound(series_id)
    return series
