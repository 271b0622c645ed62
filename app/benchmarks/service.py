"""The catalog: find or create machines, configs, metrics, benchmarks and series; search them."""

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from sqlalchemy import Select, bindparam, func, select
from sqlalchemy.orm import Session

from app.benchmarks import known_ids
from app.benchmarks import vocabulary as vocab
from app.benchmarks.models import Benchmark, CompilerConfig, Machine, Metric, Series
from app.core.bulk import insert_missing, member_of, plan_for_parameters
from app.core.db import utcnow
from app.core.errors import InvalidInput, NotFound


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
        """The key of a result row (``runs.service.list_run_results``)."""
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


@dataclass(frozen=True)
class MetricClaim:
    """What one result says about its metric; ``explicit_*`` say the uploader said it."""

    name: str
    unit: str
    higher_is_better: bool | None
    kind: str
    explicit_direction: bool


# Built once: every upload runs it, and building a statement costs more than running it.
_MACHINE_BY_NAME = select(Machine).where(Machine.name == bindparam("name"))


def upsert_machine(session: Session, name: str, device: str, **description: Any) -> Machine:
    """The machine called ``name``, created or with its description brought up to date."""
    machine = session.scalar(_MACHINE_BY_NAME, {"name": name})
    if machine is None:
        row = {"name": name, "device": device, "created_at": utcnow(), **description}
        insert_missing(session, Machine, [row], ["name"])
        machine = session.scalars(_MACHINE_BY_NAME, {"name": name}).one()
    if machine.device != device:
        raise InvalidInput(
            f"machine {name!r} is registered with device {machine.device!r}, not {device!r}",
            errors=[
                {
                    "loc": "machine.device",
                    "field": "device",
                    "message": f"expected {machine.device!r}",
                }
            ],
        )
    changed = {
        k: v for k, v in description.items() if v not in (None, "", {}) and getattr(machine, k) != v
    }
    for key, value in changed.items():  # only write when something changed: no row lock
        setattr(machine, key, value)
    return machine


def resolve_configs(
    session: Session, names: set[str], options: dict[str, dict[str, Any]]
) -> dict[str, int]:
    """Ids of compiler configs by canonical name, creating unknown ones."""
    rows = [
        {"name": n, "options": options.get(n) or vocab.COMPILER_CONFIGS.get(n, {})} for n in names
    ]
    existing = _config_ids(session, names)
    insert_missing(
        session, CompilerConfig, [r for r in rows if r["name"] not in existing], ["name"]
    )
    return existing if len(existing) == len(names) else _config_ids(session, names)


def _config_ids(session: Session, names: set[str]) -> dict[str, int]:
    query = select(CompilerConfig.name, CompilerConfig.id).where(CompilerConfig.name.in_(names))
    return dict(session.execute(query).all())


def resolve_metrics(session: Session, claims: dict[str, MetricClaim]) -> dict[str, Metric]:
    """Stored metrics by name, creating new ones from the claims; conflicts are a 422.

    A stored metric keeps its unit (values in another unit of the same dimension are
    converted by the caller) and its direction (an explicit contrary claim is refused). A
    well-known metric is created in its usual unit, whatever unit its first upload used.
    """
    stored = _metrics(session, set(claims))
    new = [c for name, c in claims.items() if name not in stored]
    insert_missing(
        session,
        Metric,
        [
            {
                "name": c.name,
                "unit": _usual_unit(c),
                "higher_is_better": c.higher_is_better,
                "kind": c.kind,
            }
            for c in new
        ],
        ["name"],
    )
    if new:
        stored = _metrics(session, set(claims))
    for name, claim in claims.items():
        _check_claim(stored[name], claim)
    return stored


def _usual_unit(claim: MetricClaim) -> str:
    spec = vocab.WELL_KNOWN_METRICS.get(claim.name)
    if spec is not None and vocab.unit_factor(claim.unit, spec.unit) is not None:
        return spec.unit
    return claim.unit


def _metrics(session: Session, names: set[str]) -> dict[str, Metric]:
    return {m.name: m for m in session.scalars(select(Metric).where(Metric.name.in_(names)))}


def _check_claim(metric: Metric, claim: MetricClaim) -> None:
    if vocab.unit_factor(claim.unit, metric.unit) is None:
        raise InvalidInput(
            f"metric {metric.name!r} is stored in {metric.unit!r}; "
            f"{claim.unit!r} cannot be converted to it",
            errors=[{"field": "unit", "message": f"use a unit convertible to {metric.unit!r}"}],
        )
    if metric.higher_is_better is None and claim.higher_is_better is not None:
        metric.higher_is_better = claim.higher_is_better
    elif claim.explicit_direction and claim.higher_is_better != metric.higher_is_better:
        raise InvalidInput(
            f"metric {metric.name!r} is stored with higher_is_better="
            f"{metric.higher_is_better}; this upload says {claim.higher_is_better}",
            errors=[{"field": "higher_is_better", "message": "contradicts the stored metric"}],
        )


def resolve_benchmarks(
    session: Session,
    keys: dict[str, BenchmarkKey],
    categories: dict[str, str],
    config_options: dict[str, dict[str, Any]],
) -> dict[str, int]:
    """Benchmark ids by fingerprint, creating missing benchmarks (and their compiler configs)."""
    ids = known_ids.KNOWN.ids(
        session, "benchmark", keys, lambda unknown: _benchmark_ids(session, unknown)
    )
    missing = [fp for fp in keys if fp not in ids]
    if not missing:
        return ids
    known_ids.created(session)
    config_ids = resolve_configs(session, {keys[fp].config for fp in missing}, config_options)
    insert_missing(
        session,
        Benchmark,
        [
            {
                "fingerprint": fp,
                "suite": keys[fp].suite,
                "model": keys[fp].model,
                "category": categories.get(fp, ""),
                "mode": keys[fp].mode,
                "precision": keys[fp].precision,
                "compiler_config_id": config_ids[keys[fp].config],
                "batch_size": keys[fp].batch_size,
                "params": json.loads(keys[fp].params_json),
            }
            for fp in missing
        ],
        ["fingerprint"],
    )
    return ids | _benchmark_ids(session, missing)


def _benchmark_ids(session: Session, fingerprints: Sequence[str]) -> dict[str, int]:
    plan_for_parameters(session)  # hundreds of fingerprints at once
    found: dict[str, int] = {}
    for condition in member_of(session, Benchmark.fingerprint, fingerprints):
        query = select(Benchmark.fingerprint, Benchmark.id).where(condition)
        found.update(session.connection().execute(query).all())
    return found


def resolve_series(
    session: Session, pairs: set[tuple[int, int]], machine_id: int, channel: str
) -> dict[tuple[int, int], int]:
    """Series ids by (benchmark id, metric id) on a machine and channel, creating missing ones."""
    ids = known_ids.KNOWN.ids(
        session,
        ("series", machine_id, channel),
        pairs,
        lambda unknown: _series_ids(session, unknown, machine_id, channel),
    )
    missing = [p for p in pairs if p not in ids]
    if not missing:
        return ids
    known_ids.created(session)
    insert_missing(
        session,
        Series,
        [
            {"benchmark_id": b, "metric_id": m, "machine_id": machine_id, "channel": channel}
            for b, m in missing
        ],
        ["benchmark_id", "metric_id", "machine_id", "channel"],
    )
    return ids | _series_ids(session, missing, machine_id, channel)


def _series_ids(
    session: Session, pairs: Sequence[tuple[int, int]], machine_id: int, channel: str
) -> dict[tuple[int, int], int]:
    plan_for_parameters(session)  # hundreds of benchmark ids at once
    wanted = set(pairs)
    metric_ids = sorted({m for _, m in wanted})
    found: dict[tuple[int, int], int] = {}
    for condition in member_of(session, Series.benchmark_id, sorted({b for b, _ in wanted})):
        query = select(Series.benchmark_id, Series.metric_id, Series.id).where(
            condition,
            Series.machine_id == machine_id,
            Series.channel == channel,
            Series.metric_id.in_(metric_ids),
        )
        rows = session.connection().execute(query).all()  # one fetch: far cheaper per row
        found.update({(b, m): i for b, m, i in rows if (b, m) in wanted})
    return found


def list_machines(session: Session) -> list[Machine]:
    """Every machine, by name."""
    return list(session.scalars(select(Machine).order_by(Machine.name)))


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
    total = session.scalar(select(func.count()).select_from(query.subquery())) or 0
    page = query.order_by(Benchmark.suite, Benchmark.model, Benchmark.id)
    return list(session.scalars(page.offset(offset).limit(limit))), total


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
    total = session.scalar(select(func.count()).select_from(query.subquery())) or 0
    page = query.order_by(Benchmark.suite, Benchmark.model, Series.id).offset(offset).limit(limit)
    return list(session.scalars(page)), total


def get_series(session: Session, series_id: int) -> Series:
    """One series by id."""
    if (series := session.get(Series, series_id)) is None:
        raise SeriesNotFound(series_id)
    return series
