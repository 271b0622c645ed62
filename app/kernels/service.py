"""Kernel profiles: stored once per case of a run, under each kernel's normalised identity."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.benchmarks.models import Benchmark
from app.core.bulk import insert_missing
from app.core.errors import InvalidInput, NotFound
from app.core.pagination import count_and_page
from app.kernels.diff import KernelDiff, ProfilesDiffer, Way, diff
from app.kernels.identity import identity_of
from app.kernels.models import KernelProfile

RAW_NAMES_KEPT = 3  # of the kernels one identity merges, the names shown beside it
RAW_NAME_CHARS = 200  # of each: a profile stays under 200 KiB with 200 kernels


@dataclass(frozen=True)
class KernelTime:
    """One kernel as a profile lists it: figures per profiled call."""

    name: str
    calls: float
    time_us: float
    graph: str = ""  # the compiled graph that ran it ("0/1": frame 0, compile 1), if known


@dataclass(frozen=True)
class CaseProfile:
    """One case's profile, as ingestion hands it over (the upload's ``kernel_profiles``)."""

    benchmark_id: int
    timing: str
    calls: int
    wall_us: float
    kernels: Sequence[KernelTime]
    other_us: float = 0.0
    graphs: int | None = None
    recompiles: int | None = None


@dataclass
class Kernel:
    """The kernels of one identity in one profile, merged."""

    kind: str
    name: str
    calls: float = 0.0
    time_us: float = 0.0
    instances: int = 0
    graphs: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        """The stored (and served) form."""
        return {
            "kind": self.kind,
            "name": self.name,
            "calls": round(self.calls, 3),
            "time_us": round(self.time_us, 3),
            "instances": self.instances,
            "graphs": self.graphs,
            "names": self.names,
        }


def merged(kernels: Sequence[KernelTime]) -> list[Kernel]:
    """The kernels under their identities, one entry each, slowest first."""
    by_identity: dict[tuple[str, str], Kernel] = {}
    for kernel in kernels:
        identity = identity_of(kernel.name)
        entry = by_identity.setdefault(
            (identity.kind, identity.name), Kernel(identity.kind, identity.name)
        )
        entry.calls += kernel.calls
        entry.time_us += kernel.time_us
        entry.instances += 1
        if kernel.graph and kernel.graph not in entry.graphs:
            entry.graphs.append(kernel.graph)
        name = kernel.name[:RAW_NAME_CHARS]
        if len(entry.names) < RAW_NAMES_KEPT and name not in entry.names:
            entry.names.append(name)
    for entry in by_identity.values():
        entry.graphs.sort()
    return sorted(by_identity.values(), key=lambda k: (-k.time_us, k.kind, k.name))


def stored_profile(profile: CaseProfile) -> dict[str, Any]:
    """A profile as ``KernelProfile`` keeps it (and a localization probe beside its samples)."""
    kernels = merged(profile.kernels)
    wall = profile.wall_us
    return {
        "timing": profile.timing,
        "calls": profile.calls,
        "wall_us": profile.wall_us,
        "kernel_us": sum(k.time_us for k in kernels),
        "other_us": profile.other_us,
        "graphs": profile.graphs,
        "recompiles": profile.recompiles,
        "kernels": [
            k.as_json()
            | {
                "mean_us": round(k.time_us / k.calls, 3) if k.calls else None,
                "share": round(k.time_us / wall, 4) if wall > 0 else None,
            }
            for k in kernels
        ],
    }


def case_profile(benchmark_id: int, payload: Mapping[str, Any]) -> CaseProfile:
    """A profile as the payload gives it (``kernel_profiles[i]``, validated) for a case."""
    return CaseProfile(
        benchmark_id=benchmark_id,
        timing=payload["timing"],
        calls=payload["calls"],
        wall_us=payload["wall_us"],
        kernels=[
            KernelTime(k["name"], k["calls"], k["time_us"], k.get("graph", ""))
            for k in payload["kernels"]
        ],
        other_us=payload.get("other_us", 0.0),
        graphs=payload.get("graphs"),
        recompiles=payload.get("recompiles"),
    )


def store(session: Session, run_id: int, profiles: Sequence[CaseProfile]) -> None:
    """Keep the run's case profiles; a case the run holds a profile of already keeps it.

    A run's shards may profile the same case (a retried job): the first stored stays, as a
    run's first result of a series does.
    """
    rows = [
        {"run_id": run_id, "benchmark_id": profile.benchmark_id, **stored_profile(profile)}
        for profile in profiles
    ]
    if rows:
        insert_missing(session, KernelProfile, rows, ["run_id", "benchmark_id"])


def of_run(
    session: Session, run_id: int, benchmark_id: int | None, offset: int, limit: int
) -> tuple[list[KernelProfile], int]:
    """A page of the run's profiles (of one case, if asked) in case order, and their count."""
    query = select(KernelProfile).where(KernelProfile.run_id == run_id)
    if benchmark_id is not None:
        query = query.where(KernelProfile.benchmark_id == benchmark_id)
    return count_and_page(session, query, [KernelProfile.benchmark_id], offset, limit)


def of_case(session: Session, run_id: int, benchmark_id: int) -> KernelProfile | None:
    """The profile of one case in one run, if the run has one."""
    query = select(KernelProfile).where(
        KernelProfile.run_id == run_id, KernelProfile.benchmark_id == benchmark_id
    )
    return session.scalar(query)


@dataclass(frozen=True)
class CaseDiff:
    """A case's kernel diff and the case."""

    benchmark: Benchmark
    diff: KernelDiff


def case_diff(
    session: Session,
    base_run: int,
    head_run: int,
    benchmark_id: int,
    head_benchmark_id: int | None = None,
    toward: Way | None = None,
) -> CaseDiff:
    """The kernel diff of one case from one run to another; NotFound names a missing side.

    ``head_benchmark_id``: the head side's case where it is another (two configs of a case).
    ``toward``: the way a finding between the runs moved the case (``diff``).
    """
    sides = []
    head_case = head_benchmark_id or benchmark_id
    for side, run_id, case in (("base", base_run, benchmark_id), ("head", head_run, head_case)):
        profile = of_case(session, run_id, case)
        if profile is None:
            raise NotFound(f"run {run_id} ({side}) has no kernel profile of benchmark {case}")
        sides.append(profile)
    base, head = sides
    return CaseDiff(base.benchmark, _diffed(base, head, toward))


def diff_of(
    base: Mapping[str, Any], head: Mapping[str, Any], toward: Way | None = None
) -> KernelDiff:
    """The diff of two profiles kept as JSON (a localization probe's); 422 if they differ."""
    return _diffed(SimpleNamespace(**base), SimpleNamespace(**head), toward)


def _diffed(base: Any, head: Any, toward: Way | None) -> KernelDiff:
    """``diff``, profiles that time different things refused as bad input (a 422)."""
    try:
        return diff(base, head, toward)
    except ProfilesDiffer as exc:
        raise InvalidInput(str(exc)) from exc


def step_diff(
    session: Session,
    last_good_run: int,
    first_bad_run: int,
    benchmark_id: int,
    toward: Way | None,
) -> KernelDiff | None:
    """A step's kernel diff, when both runs profiled the case the same way; else None.

    ``toward``: the way the step moved the case (``diff``).
    """
    base = of_case(session, last_good_run, benchmark_id)
    head = of_case(session, first_bad_run, benchmark_id)
    if base is None or head is None or base.timing != head.timing:
        return None
    return diff(base, head, toward)
