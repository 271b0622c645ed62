"""Ingest runs and the shards of runs: idempotent, all-or-nothing, in the caller's transaction."""

import hashlib
import json
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from prometheus_client import Counter
from sqlalchemy import bindparam, select, update
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value

from app.benchmarks import vocabulary as vocab
from app.benchmarks.models import Machine
from app.benchmarks.resolve import Cases, MachineDescription, case_key, cases_of, resolve_catalog
from app.core.bounds import nul_locations
from app.core.bulk import insert_missing, insert_returning, member_of
from app.core.config import Settings
from app.core.db import utcnow
from app.core.errors import Conflict, InvalidInput
from app.core.metrics import after_commit
from app.core.queue import enqueue_after_commit
from app.core.spread import relative_spread
from app.jobs import DETECT_RUN
from app.kernels import code as kernel_code
from app.kernels import service as kernels
from app.runs import branches, shards
from app.runs.models import INVALID, Environment, Result, Run
from app.runs.schemas import EnvironmentIn, KernelProfileIn, ResultIn, RunIn
from app.runs.writer import ResultRow, write_results


class ShardOfInvalidRun(Conflict):
    """A new shard for a run an admin invalidated: its results would enter history."""

    def __init__(self, run_id: int) -> None:
        super().__init__(f"run {run_id} was invalidated: its key takes no further shards")


class KeyReused(Conflict):
    """A different payload was posted under a key that is already stored."""

    def __init__(self, project: str, key: str, run_id: int) -> None:
        super().__init__(
            f"run key {key!r} of project {project!r} is already stored (run {run_id}) with a "
            "different payload; "
            "a retry must send the same payload, a new run needs a new key"
        )


@dataclass(frozen=True)
class Ingested:
    """The stored run, and whether this call created it (False: an idempotent retry)."""

    run: Run
    created: bool


@dataclass(frozen=True)
class NewRun:
    """What a new run's row holds beyond its payload: where it came from, why it is apart."""

    source: str
    branch_reason: str


SOURCE_LENGTH = 128  # of the column Run.source
NEWER = {"kernel_profiles"}  # payload fields left out of its hash while empty
# Built once: every upload runs them, and building a statement costs more than running it.
_RUN_ID_BY_KEY = select(Run.id).where(
    Run.project == bindparam("project"), Run.key == bindparam("key")
)
_ENVIRONMENT_BY_HASH = select(Environment).where(
    Environment.content_hash == bindparam("content_hash")
)
# Counted once the upload's transaction commits (docs/metrics.md).
UPLOADS = Counter(
    "benchwatch_uploads",
    "Runs and shards received: stored (new results) or retry (stored before, nothing added)",
    ["outcome"],
)
RESULTS_INGESTED = Counter("benchwatch_results_ingested", "Results received in stored uploads")


def _refuse_nul(places: list[str]) -> InvalidInput:
    errors = [_nul_error(place) for place in places]
    first = errors[0]
    return InvalidInput(
        f"{len(errors)} problem(s); first at {first['loc']}: {first['message']}", errors=errors
    )


def _nul_error(place: str) -> dict[str, Any]:
    error: dict[str, Any] = {"loc": place, "message": "NUL characters (\\u0000) cannot be stored"}
    error["field"] = place.rsplit(".", 1)[-1].split("[", 1)[0]
    if place.startswith("results["):
        error["result_index"] = int(place[len("results[") : place.index("]")])
    return error


ADMIN_SCOPE = "admin"  # a token that may import history outside the time window


def check_run_time(
    run_in: RunIn,
    scopes: Sequence[str],
    settings: Settings,
    loc_prefix: str = "body.",
    now: datetime | None = None,
) -> None:
    """422 unless the run's times are in the window around now, for a token without admin.

    A run's time places its results in a monthly partition (``partitions``): an ingest token
    sending any time from 1970 to 2999 would make the upkeep a partition per month it finds.
    An admin token imports history (or a clock far off) outside the window on purpose.
    ``loc_prefix`` is where the request gave the times (``body.``; an upload's fields: "").
    """
    if ADMIN_SCOPE in scopes:
        return
    now = now or utcnow()
    earliest = now - timedelta(days=settings.RUN_TIME_BACK_DAYS)
    latest = now + timedelta(days=settings.RUN_TIME_AHEAD_DAYS)
    errors = [
        {
            "loc": f"{loc_prefix}{field}",
            "field": field,
            "message": f"{moment.isoformat()} is outside {earliest:%Y-%m-%d %H:%M} to "
            f"{latest:%Y-%m-%d %H:%M} UTC (BENCHWATCH_RUN_TIME_BACK_DAYS="
            f"{settings.RUN_TIME_BACK_DAYS}, _AHEAD_DAYS={settings.RUN_TIME_AHEAD_DAYS}); "
            "an admin token may import history outside it",
        }
        for field, moment in (
            ("started_at", run_in.started_at),
            ("finished_at", run_in.finished_at),
        )
        if moment is not None and not earliest <= moment <= latest
    ]
    if errors:
        first = errors[0]
        raise InvalidInput(f"{first['loc']}: {first['message']}", errors=errors)


def payload_hash(run_in: RunIn) -> str:
    """A hash of the validated payload: equal for a retry, different for any change."""
    return hashlib.sha256(_canonical_json(run_in)).hexdigest()


def _canonical_json(run_in: RunIn) -> bytes:
    """The validated payload as JSON; without kernel profiles it is what it was before them.

    A run stored without a body (an upload, a suite run) is known again by this text's hash,
    so a field added to the payload stays out of it while empty.
    """
    return run_in.model_dump_json(exclude=None if run_in.kernel_profiles else NEWER).encode()


def ingest_run(
    session: Session,
    run_in: RunIn,
    *,
    source: str,
    body: bytes | None = None,
    default_branches: Mapping[str, str] = branches.DEFAULT_BRANCHES,
) -> Ingested:
    """Store a run and its results; a retry with the same key and payload returns the stored run.

    ``body``: the JSON the run was validated from, if any. Its hash then stands for the
    payload: a retry sends the same bytes, and hashing them costs far less than serialising
    the validated run again. A run of a branch other than its channel's default
    (``default_branches``) is stored under a channel of its own (``branches``). A shard of a
    run adds its results to the run of its key (``shards``).

    Everything happens in the caller's transaction (the caller commits), so a request that
    fails validation half-way stores nothing.
    """
    document = _canonical_json(run_in) if body is None else body
    # JSON text holds a NUL only as this escape: the walk runs only when it is there.
    if b"\\u0000" in document and (places := list(nul_locations(run_in))):
        raise _refuse_nul(places)
    digest = hashlib.sha256(document).hexdigest()
    branch_reason = branches.kept_apart_because(
        run_in.branch, run_in.environment.channel, default_branches, run_in.default_branch
    )
    run_in = _kept_apart(run_in, default_branches)
    if run_in.shard is not None:
        run_in = run_in.model_copy(update={"key": shards.run_key(run_in)})
    if (existing := _run_by_key(session, run_in.project, run_in.key)) is not None:
        ingested = _again(session, existing, run_in, digest)
    else:
        ingested = _store(session, run_in, digest, NewRun(source, branch_reason))
    # A retry of a run still undetected asks again: the first task may be the one a broker
    # outage lost (detection is idempotent; the sweep would catch it later anyway).
    run = ingested.run
    if run.status == shards.COMPLETED and (ingested.created or run.detected_at is None):
        enqueue_after_commit(session, DETECT_RUN, run_id=run.id)
    after_commit(session, _counter(ingested.created, len(run_in.results)))
    return ingested


def _counter(created: bool, results: int) -> Callable[[], None]:
    """What the commit of an upload adds to ``UPLOADS`` and ``RESULTS_INGESTED``."""

    def count() -> None:
        UPLOADS.labels(outcome="stored" if created else "retry").inc()
        if created:
            RESULTS_INGESTED.inc(results)

    return count


def _kept_apart(run_in: RunIn, default_branches: Mapping[str, str]) -> RunIn:
    """``run_in``, under its branch's own channel when it is not the default branch's."""
    channel = run_in.environment.channel
    if branches.is_default(run_in.branch, channel, default_branches, run_in.default_branch):
        return run_in
    environment = run_in.environment.model_copy(
        update={"channel": branches.branch_channel(channel, run_in.branch)}
    )
    return run_in.model_copy(update={"environment": environment})


def _again(session: Session, run: Run, run_in: RunIn, digest: str) -> Ingested:
    """A (project, key) stored already: a retry, or a further shard of the run."""
    if run_in.shard is None:
        return Ingested(_same_payload(run, run_in, digest), created=False)
    # Shards of one run take turns (their completion check counts the others): a row lock on
    # Postgres. SQLite's reads run outside a transaction until its first write, so there a
    # write to the run's row takes the database's write lock before the run is read again;
    # else two shards read the same counts and the second's update loses the first's.
    if session.get_bind().dialect.name == "sqlite":
        touch = update(Run).where(Run.id == run.id).values(id=Run.id)
        session.execute(touch.execution_options(synchronize_session=False))
    else:
        session.execute(select(Run.id).where(Run.id == run.id).with_for_update())
    run = session.get_one(Run, run.id, populate_existing=True)
    if shards.known_shard(session, run, run_in, digest):
        return Ingested(run, created=False)
    if run.status == INVALID:
        raise ShardOfInvalidRun(run.id)
    return _store(session, run_in, digest, run)


def _store(session: Session, run_in: RunIn, digest: str, into: Run | NewRun) -> Ingested:
    """The one path of an upload's results into a run: a new one, or the run a shard joins.

    The results are checked (a case's metric once) and resolved into the catalog's series,
    then written. A new run's row is inserted first, with the results' coverage; a further
    shard adds only the series its run holds no result of yet (the others count as its
    duplicates), and widens the run's times and counts by what it added.
    """
    results = run_in.results
    cases = cases_of(results)
    _reject_duplicates(results, cases)
    profiled = _profiled_cases(run_in.kernel_profiles, cases)
    resolved = resolve_catalog(
        session, _machine(run_in), run_in.environment.channel, results, cases, run_in.project
    )
    series_ids, factors = resolved.series_ids, resolved.factors
    if isinstance(into, NewRun):
        coverage = _coverage(results, cases)
        run = _insert_run(
            session, run_in, resolved.machine, digest, into.source, coverage, into.branch_reason
        )
        if run is None:  # a concurrent upload of the key committed first
            stored = _run_by_key(session, run_in.project, run_in.key)
            if stored is None:
                raise RuntimeError(f"run key {run_in.key!r} conflicted, yet no run has it")
            return _again(session, stored, run_in, digest)
    else:
        run = into
        held = _series_held(session, run.id, series_ids)
        kept = [i for i, series_id in enumerate(series_ids) if series_id not in held]
        results = [results[i] for i in kept]
        series_ids, factors = [series_ids[i] for i in kept], [factors[i] for i in kept]
    rows = _rows(series_ids, results, factors)
    write_results(session, run.id, run.started_at, rows)
    if profiled:
        kernels.store(session, run.id, _case_profiles(run_in, profiled, resolved.benchmark_ids))
        kernel_code.store(session, run.id, _case_codes(run_in, profiled, resolved.benchmark_ids))
    if run is into:  # a further shard
        shards.widen(run, run_in, _coverage(results, cases_of(results)) if results else {})
    if run_in.shard is not None:
        duplicates = len(run_in.results) - len(rows)
        shards.record_shard(session, run, run_in, digest, len(rows), duplicates)
    session.flush()
    return Ingested(run, created=True)


def _series_held(session: Session, run_id: int, series_ids: Sequence[int]) -> set[int]:
    """The series among ``series_ids`` the run has a result of already."""
    held: set[int] = set()
    for condition in member_of(session, Result.series_id, sorted(set(series_ids))):
        held.update(
            session.scalars(select(Result.series_id).where(Result.run_id == run_id, condition))
        )
    return held


def _rows(
    series_ids: Sequence[int], results: Sequence[ResultIn], factors: Sequence[float]
) -> list[ResultRow]:
    return [
        _result_row(series_id, result, factor)
        for series_id, result, factor in zip(series_ids, results, factors, strict=True)
    ]


def _run_by_key(session: Session, project: str, key: str) -> Run | None:
    """The run of ``key`` in ``project`` (the pair is its identity: a key in two is two runs)."""
    # The id alone first: a new key (the usual case) costs no ORM entity load.
    run_id = session.connection().scalar(_RUN_ID_BY_KEY, {"project": project, "key": key})
    return None if run_id is None else session.get(Run, run_id)


def _same_payload(run: Run, run_in: RunIn, digest: str) -> Run:
    """``run``, if ``run_in`` is the payload it was stored from; else 409 (KeyReused).

    The one definition of "the same payload": the same JSON bytes (``digest``: a retry
    resends what it sent), or the same validated payload (``payload_hash``), which is what a
    run stored without a body holds (an upload, a suite run, a run posted before body hashes).
    """
    if run.payload_hash != digest and run.payload_hash != payload_hash(run_in):
        raise KeyReused(run.project, run.key, run.id)
    return run


def _reject_duplicates(results: list[ResultIn], cases: Cases) -> None:
    first: dict[tuple[int, str], int] = {}
    errors = []
    for index, (result, case) in enumerate(zip(results, cases.of_result, strict=True)):
        seen = first.setdefault((case, result.metric), index)
        if seen != index:
            errors.append(
                {
                    "loc": f"results[{index}]",
                    "result_index": index,
                    "field": "metric",
                    "message": f"duplicates results[{seen}]: same benchmark and metric "
                    f"({result.suite}/{result.model}, {result.metric!r})",
                }
            )
    if errors:
        raise InvalidInput(f"{len(errors)} duplicate (benchmark, metric) rows", errors=errors)


def _profiled_cases(profiles: Sequence[KernelProfileIn], cases: Cases) -> list[int]:
    """The case of each kernel profile; 422 for one of no result's case, or a case twice."""
    index = {key: i for i, key in enumerate(cases.keys)}
    first_of: dict[int, int] = {}  # a case's first profile
    errors = []
    for at, profile in enumerate(profiles):
        case = index.get(case_key(profile))
        if case is None:
            message = f"no result of the run is of this case ({profile.suite}/{profile.model}, "
            message += f"{profile.mode}, {profile.precision}, {profile.config})"
        elif (seen := first_of.setdefault(case, at)) != at:
            message = f"duplicates kernel_profiles[{seen}]: one profile per case"
        else:
            continue
        error = {"loc": f"kernel_profiles[{at}]", "field": "kernel_profiles", "message": message}
        errors.append(error)
    if errors:
        first = errors[0]
        raise InvalidInput(
            f"{len(errors)} problem(s); first at {first['loc']}: {first['message']}", errors=errors
        )
    return list(first_of)  # with no error, the case of each profile in turn


def _case_profiles(
    run_in: RunIn, profiled: Sequence[int], benchmark_ids: Sequence[int]
) -> list[kernels.CaseProfile]:
    return [
        kernels.case_profile(benchmark_ids[case], profile.model_dump(exclude={"code"}))
        for profile, case in zip(run_in.kernel_profiles, profiled, strict=True)
    ]


def _case_codes(
    run_in: RunIn, profiled: Sequence[int], benchmark_ids: Sequence[int]
) -> list[kernel_code.CaseCode]:
    return [
        kernel_code.CaseCode(
            benchmark_ids[case],
            profile.code.graphs,
            [k.model_dump() for k in profile.code.kernels],
        )
        for profile, case in zip(run_in.kernel_profiles, profiled, strict=True)
        if profile.code is not None
    ]


def _coverage(results: list[ResultIn], cases: Cases) -> dict[str, int]:
    """Run columns counting cases: a case failed if any result failed or its accuracy failed."""
    outcomes: list[set[str]] = [set() for _ in cases.keys]
    for result, case in zip(results, cases.of_result, strict=True):
        status = result.status
        if (
            result.metric == "accuracy"
            and result.text_value is not None
            and result.text_value not in vocab.PASSING_ACCURACY
        ):
            status = "failed"
        outcomes[case].add(status)
    failed = sum("failed" in s for s in outcomes)
    skipped = sum(s == {"skipped"} for s in outcomes)
    return {
        "cases_attempted": len(outcomes),
        "cases_failed": failed,
        "cases_skipped": skipped,
        "cases_passed": len(outcomes) - failed - skipped,
        "result_count": len(results),
    }


def _machine(run_in: RunIn) -> MachineDescription:
    machine = run_in.machine
    return MachineDescription(
        machine.name,
        machine.device,
        {
            "arch": machine.arch,
            "arch_short": vocab.short_arch(machine.arch) if machine.arch else "",
            "gpu_count": machine.gpu_count,
            "gpu_memory_gb": machine.gpu_memory_gb,
            "cpu": machine.cpu,
            "cpu_count": machine.cpu_count,
            "host_memory_gb": machine.host_memory_gb,
            "extra": machine.extra,
        },
    )


def _insert_run(
    session: Session,
    run_in: RunIn,
    machine: Machine,
    digest: str,
    source: str,
    coverage: dict[str, int],
    branch_reason: str = "",
) -> Run | None:
    """The new run (None: a concurrent upload of its key committed first)."""
    machine_in = run_in.machine
    environment = _environment(session, run_in.environment, machine_in.driver)
    row = {
        "key": run_in.key,
        "payload_hash": digest,
        "machine_id": machine.id,
        "environment_id": environment.id,
        "channel": run_in.environment.channel,
        "project": run_in.project,
        "trigger": run_in.trigger,
        "tier": run_in.tier,
        "commit": run_in.commit,
        "branch": run_in.branch,
        "base_commit": run_in.base_commit,
        "branch_reason": branch_reason,
        "status": shards.initial_status(run_in),
        "expected_shards": run_in.shard.expected if run_in.shard else None,
        "url": run_in.url,
        "hostname": machine_in.hostname,
        "source": source[:SOURCE_LENGTH],  # "upload:" and a token name of the same length
        "started_at": run_in.started_at or utcnow(),
        "finished_at": run_in.finished_at,
        "extra": run_in.extra,
        **coverage,
    }
    # ON CONFLICT DO NOTHING: a concurrent upload of the same (project, key) waits for the
    # first to commit, then inserts nothing, and the caller reads the stored run.
    run = insert_returning(session, Run, row, ["project", "key"])
    if run is None:
        return None
    # The machine and the environment are loaded: attached here, the response needs no query
    # (the identity map holds them weakly, so they may be gone by the time it is written).
    set_committed_value(run, "machine", machine)
    set_committed_value(run, "environment", environment)
    return run


def _environment(session: Session, env_in: EnvironmentIn, machine_driver: str) -> Environment:
    fields = env_in.model_dump()
    fields["driver"] = fields["driver"] or machine_driver
    for package in ("torch", "triton"):  # versions given only in the package list
        fields[package] = fields[package] or env_in.packages.get(package, "")
    canonical = json.dumps(fields, sort_keys=True, default=str)
    content_hash = hashlib.sha256(canonical.encode()).hexdigest()
    if (found := session.scalar(_ENVIRONMENT_BY_HASH, {"content_hash": content_hash})) is not None:
        return found
    insert_missing(
        session, Environment, [{"content_hash": content_hash, **fields}], ["content_hash"]
    )
    return session.scalars(_ENVIRONMENT_BY_HASH, {"content_hash": content_hash}).one()


def _result_row(series_id: int, result: ResultIn, factor: float) -> ResultRow:
    """One row, its numbers multiplied by ``factor`` (into the metric's stored unit)."""
    samples = result.samples
    value = result.value
    if factor != 1.0:
        samples = [s * factor for s in samples] if samples else samples
        value = value * factor if value is not None else None
    if value is None and samples and result.status == "ok":
        value = statistics.median(samples)
    spread = relative_spread(samples) if samples and result.status == "ok" else None
    return (
        series_id,
        result.status,
        value,
        samples,
        result.text_value,
        result.reason,
        result.extra,
        spread,
    )
