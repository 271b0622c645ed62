"""A run's results, resolved against the catalog in one call: machine, metrics, benchmarks, series.

Ingestion hands ``resolve_catalog`` the run's machine, channel, project and results; it finds
or creates every catalog row they name and returns, per result, the series it belongs to and
the factor that brings its values into the metric's stored unit. Each kind of row is read,
the missing ones inserted (``ON CONFLICT DO NOTHING``: a concurrent upload may create the same
ones) and read again; benchmark and series ids are remembered across requests (``known_ids``).
"""

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from app.benchmarks import known_ids
from app.benchmarks import vocabulary as vocab
from app.benchmarks.models import Benchmark, CompilerConfig, Machine, Metric, Series
from app.benchmarks.service import BenchmarkKey
from app.core.bulk import insert_missing, member_of, plan_for_parameters
from app.core.db import utcnow
from app.core.errors import InvalidInput
from app.core.names import DEFAULT_PROJECT


class CaseRow(Protocol):
    """What names a case in a row (``app.runs.schemas.CaseFields``)."""

    suite: str
    model: str
    precision: str
    config: str
    batch_size: int | None
    params: dict[str, Any]

    @property  # read-only: the payload narrows it to its vocabulary's words
    def mode(self) -> str:
        """Training or inference."""


class CaseResult(CaseRow, Protocol):
    """What the catalog reads of one result (``app.runs.schemas.ResultIn`` is one)."""

    category: str
    config_options: dict[str, Any] | None
    metric: str
    unit: str | None
    higher_is_better: bool | None

    @property  # read-only: the payload narrows it to its vocabulary's words
    def kind(self) -> str | None:
        """The metric kind the result gives, if any."""

    @property
    def resolved_unit(self) -> str:
        """The unit the values come in."""

    @property
    def resolved_direction(self) -> bool | None:
        """Whether higher is better, as far as the result tells."""

    @property
    def resolved_kind(self) -> str:
        """The metric's kind (performance, accuracy, ...)."""


@dataclass(frozen=True)
class MachineDescription:
    """A run's machine: its name identifies it, its device may not change, the rest may."""

    name: str
    device: str
    description: dict[str, Any]


@dataclass(frozen=True)
class Resolved:
    """Where a run's results go."""

    machine: Machine
    series_ids: list[int]  # results[i] belongs to series series_ids[i]
    factors: list[float]  # results[i]'s numbers times factors[i]: the metric's stored unit
    benchmark_ids: list[int]  # cases.keys[i] is benchmark benchmark_ids[i]


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


def _upsert_machine(session: Session, name: str, device: str, **description: Any) -> Machine:
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


def _resolve_configs(
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


def _resolve_metrics(session: Session, claims: dict[str, MetricClaim]) -> dict[str, Metric]:
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


def _resolve_benchmark_ids(
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
    config_ids = _resolve_configs(session, {keys[fp].config for fp in missing}, config_options)
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


def _resolve_series(
    session: Session, pairs: set[tuple[int, int]], machine_id: int, channel: str, project: str
) -> dict[tuple[int, int], int]:
    """Series ids by (benchmark id, metric id) on a machine, channel and project; makes missing."""
    ids = known_ids.KNOWN.ids(
        session,
        ("series", machine_id, channel, project),
        pairs,
        lambda unknown: _series_ids(session, unknown, machine_id, channel, project),
    )
    missing = [p for p in pairs if p not in ids]
    if not missing:
        return ids
    known_ids.created(session)
    insert_missing(
        session,
        Series,
        [
            {
                "benchmark_id": b,
                "metric_id": m,
                "machine_id": machine_id,
                "channel": channel,
                "project": project,
            }
            for b, m in missing
        ],
        ["benchmark_id", "metric_id", "machine_id", "channel", "project"],
    )
    return ids | _series_ids(session, missing, machine_id, channel, project)


def _series_ids(
    session: Session,
    pairs: Sequence[tuple[int, int]],
    machine_id: int,
    channel: str,
    project: str,
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
            Series.project == project,
            Series.metric_id.in_(metric_ids),
        )
        rows = session.connection().execute(query).all()  # one fetch: far cheaper per row
        found.update({(b, m): i for b, m, i in rows if (b, m) in wanted})
    return found


@dataclass(frozen=True)
class Cases:
    """The distinct benchmark cases of a run's results, and the case of each result."""

    keys: list[BenchmarkKey]
    of_result: list[int]  # results[i] belongs to keys[of_result[i]]


def cases_of(results: Sequence[CaseResult]) -> Cases:
    """The distinct cases of ``results`` (in order of first appearance) and each one's case."""
    index: dict[tuple[Any, ...], int] = {}
    of_result = [index.setdefault(_case_fields(r), len(index)) for r in results]
    return Cases([BenchmarkKey._make(key) for key in index], of_result)


def case_key(row: CaseRow) -> BenchmarkKey:
    """The case a row (a result, a kernel profile) names."""
    return BenchmarkKey._make(_case_fields(row))


def _case_fields(row: CaseRow) -> tuple[Any, ...]:
    # A plain tuple: a run's every result passes here, and a NamedTuple costs more to build.
    to_json = BenchmarkKey.params_to_json
    return (
        row.suite,
        row.model,
        row.mode,
        row.precision,
        row.config,
        row.batch_size,
        to_json(row.params),
    )


def resolve_catalog(
    session: Session,
    machine: MachineDescription,
    channel: str,
    results: Sequence[CaseResult],
    cases: Cases,
    project: str = DEFAULT_PROJECT,
) -> Resolved:
    """Find or create every catalog row the results name; 422 where they contradict it.

    ``cases`` is ``cases_of(results)`` (ingestion needs it first, to refuse duplicates); the
    series are ``project``'s own (machines, benchmarks and metrics are shared).
    """
    found = _upsert_machine(session, machine.name, machine.device, **machine.description)
    claims, unit_of = _metric_claims(results)
    metrics = _resolve_metrics(session, claims)
    benchmark_ids = _benchmarks_of(session, results, cases)
    series_keys = [
        (benchmark_ids[case], metrics[r.metric].id)
        for r, case in zip(results, cases.of_result, strict=True)
    ]
    series_ids = _resolve_series(session, set(series_keys), found.id, channel, project)
    factors = {
        pair: vocab.unit_factor(unit, metrics[pair[0]].unit) or 1.0
        for pair, unit in unit_of.items()
    }
    return Resolved(
        found,
        [series_ids[key] for key in series_keys],
        [factors[(r.metric, r.unit)] for r in results],
        benchmark_ids,
    )


def _benchmarks_of(session: Session, results: Sequence[CaseResult], cases: Cases) -> list[int]:
    """The benchmark id of each case, creating missing benchmarks and compiler configs."""
    fingerprints = [_fingerprint(key) for key in cases.keys]
    categories = {
        fingerprints[case]: r.category
        for r, case in zip(results, cases.of_result, strict=True)
        if r.category
    }
    ids = _resolve_benchmark_ids(
        session,
        dict(zip(fingerprints, cases.keys, strict=True)),
        categories,
        {r.config: r.config_options for r in results if r.config_options},
    )
    return [ids[fp] for fp in fingerprints]


@lru_cache(maxsize=16_384)
def _fingerprint(key: BenchmarkKey) -> str:
    """``key.fingerprint``, remembered: every nightly run repeats the same cases.

    A pure function of the key, and hashing every case of every run again would be a visible
    share of an upload's work.
    """
    return key.fingerprint


UnitKey = tuple[str, str | None]  # (metric, unit as given)


def _metric_claims(
    results: Sequence[CaseResult],
) -> tuple[dict[str, MetricClaim], dict[UnitKey, str]]:
    """What the results say of each metric, refused where they disagree.

    Also returns, per distinct (metric, unit given), the unit the values come in.
    """
    claims: dict[str, MetricClaim] = {}
    units: dict[UnitKey, str] = {}
    seen: set[tuple[str, str | None, bool | None, str | None]] = set()
    for index, result in enumerate(results):
        if (key := (result.metric, result.unit, result.higher_is_better, result.kind)) in seen:
            continue
        seen.add(key)
        claim = MetricClaim(
            result.metric,
            result.resolved_unit,
            result.resolved_direction,
            result.resolved_kind,
            explicit_direction=result.higher_is_better is not None,
        )
        first = claims.setdefault(result.metric, claim)
        if vocab.unit_factor(claim.unit, first.unit) is None or (
            claim.higher_is_better is not None
            and first.higher_is_better is not None
            and claim.higher_is_better != first.higher_is_better
        ):
            raise InvalidInput(
                f"results disagree about metric {result.metric!r}",
                errors=[
                    {
                        "loc": f"results[{index}]",
                        "result_index": index,
                        "field": "unit",
                        "message": "unit or higher_is_better differs from an earlier "
                        f"result of metric {result.metric!r}",
                    }
                ],
            )
        units[(result.metric, result.unit)] = claim.unit
    return claims, units
