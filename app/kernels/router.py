"""Kernel reads: a run's profiles; kernel and code diffs of a case across runs, steps, probes."""

from typing import Annotated

from fastapi import APIRouter, Depends, Query
from sqlalchemy import select

from app.anomalies.models import Regression
from app.api.deps import ReadAccess, SessionDep
from app.api.responses import READS, errors
from app.api.validation import ApiRoute
from app.benchmarks.models import Benchmark
from app.benchmarks.schemas import BenchmarkRead
from app.core.bounds import RowId
from app.core.errors import NotFound
from app.core.pagination import Page, PageParams
from app.kernels import code as kernel_code
from app.kernels import service
from app.kernels.schemas import (
    CodeDiffRead,
    KernelDiffRead,
    KernelProfileRead,
    ProbeKernelDiffRead,
)
from app.localization.models import LocalizationProbe
from app.runs.models import Run

reads = APIRouter(
    tags=["kernels"], dependencies=[ReadAccess], route_class=ApiRoute, responses=READS
)


class ProfilePaging(PageParams):
    """A page of profiles: each holds up to 200 kernels, so pages are short."""

    limit: Annotated[int, Query(ge=1, le=50)] = 20


@reads.get("/runs/{run_id}/kernels", response_model=Page[KernelProfileRead], responses=errors(404))
def run_kernels(
    run_id: RowId,
    session: SessionDep,
    paging: Annotated[ProfilePaging, Depends()],
    benchmark_id: RowId | None = None,
) -> Page[KernelProfileRead]:
    """The run's kernel profiles, one per profiled case, in case order (of one case, if asked).

    Each kernel is listed under its normalised identity (docs/kernels.md), slowest first, with
    its calls and time per profiled call.
    """
    if session.get(Run, run_id) is None:
        raise NotFound(f"run {run_id} not found")
    items, total = service.of_run(session, run_id, benchmark_id, paging.offset, paging.limit)
    return paging.of([KernelProfileRead.model_validate(p) for p in items], total)


@reads.get("/kernels/diff", response_model=KernelDiffRead, responses=errors(404))
def kernel_diff(
    base_run: RowId,
    head_run: RowId,
    benchmark_id: RowId,
    session: SessionDep,
    head_benchmark_id: Annotated[
        RowId | None,
        Query(description="the head side's case, where it is another (two configs of a case)"),
    ] = None,
) -> KernelDiffRead:
    """One case's kernels from `base_run` to `head_run`: what appeared, went, moved or fused.

    Each kernel's change is its share of the step (the change in a call's wall time); the
    kernels past the stored lists and the time outside kernels make up the rest. 404 when
    either run has no profile of the case; 422 when one times device kernels and the other
    CPU time.
    """
    found = service.case_diff(session, base_run, head_run, benchmark_id, head_benchmark_id)
    return KernelDiffRead(
        base_run_id=base_run,
        head_run_id=head_run,
        benchmark=BenchmarkRead.model_validate(found.benchmark),
        diff=found.diff,
    )


@reads.get("/kernels/code-diff", response_model=CodeDiffRead, responses=errors(404))
def code_diff(
    base_run: RowId,
    head_run: RowId,
    benchmark_id: RowId,
    session: SessionDep,
    kernel: Annotated[
        str | None,
        Query(max_length=200, description="diff this kernel (an identity, e.g. fused_add_mul)"),
    ] = None,
    head_benchmark_id: Annotated[
        RowId | None,
        Query(description="the head side's case, where it is another (two configs of a case)"),
    ] = None,
) -> CodeDiffRead:
    """What Inductor generated for one case, kernel by kernel, from `base_run` to `head_run`.

    Kernels are matched by identity, renumbering aside (docs/kernels.md): changed ones
    first with a unified diff (the first 50; `kernel` asks for one by identity), then those
    that appeared or disappeared with their source, then the same. 404 when either run kept
    no code of the case (eager configs, runs from CI without it, or cleared by retention).
    """
    benchmark = session.get(Benchmark, benchmark_id)
    if benchmark is None:
        raise NotFound(f"benchmark {benchmark_id} not found")
    found = kernel_code.case_code_diff(
        session, base_run, head_run, benchmark_id, head_benchmark_id, kernel
    )
    return CodeDiffRead(
        base_run_id=base_run,
        head_run_id=head_run,
        benchmark=BenchmarkRead.model_validate(benchmark),
        kernels=found,
    )


@reads.get(
    "/regressions/{regression_id}/kernels", response_model=KernelDiffRead, responses=errors(404)
)
def regression_kernels(regression_id: RowId, session: SessionDep) -> KernelDiffRead:
    """The regression's case, kernel by kernel, from its last good run to its first bad one.

    404 when the regression does not exist or either run has no profile of its case (runs
    from CI without profiles, or measured before profiles were kept).
    """
    regression = session.get(Regression, regression_id)
    if regression is None:
        raise NotFound(f"regression {regression_id} not found")
    base, head = regression.last_good_run_id, regression.first_bad_run_id
    found = service.case_diff(
        session, base, head, regression.series.benchmark_id, toward=regression.kernel_way
    )
    return KernelDiffRead(
        base_run_id=base,
        head_run_id=head,
        benchmark=BenchmarkRead.model_validate(found.benchmark),
        diff=found.diff,
    )


@reads.get(
    "/localizations/{localization_id}/probes/{position}/kernels",
    response_model=ProbeKernelDiffRead,
    responses=errors(404),
)
def probe_kernels(
    localization_id: RowId, position: int, session: SessionDep
) -> ProbeKernelDiffRead:
    """A probe's kernels against the last good reference's, as a regression's are diffed.

    Which kernels a component or commit moved, probe by probe. 404 when the localization,
    the probe, or a profile of either is missing (a probe's command may give none).
    """
    probes = {
        p.position: p
        for p in session.scalars(
            select(LocalizationProbe).where(LocalizationProbe.localization_id == localization_id)
        )
    }
    probe = probes.get(position)
    if probe is None:
        raise NotFound(f"localization {localization_id} has no probe {position}")
    good = next(
        (
            p
            for _, p in sorted(probes.items())
            if p.outcome == "reference" and "last good" in p.label and p.kernel_profile
        ),
        None,
    )
    if good is None or good.kernel_profile is None:
        raise NotFound(f"localization {localization_id}: its last good reference has no profile")
    if not probe.kernel_profile:
        raise NotFound(f"localization {localization_id}: probe {position} has no kernel profile")
    # A localization looks for what made its case worse: the kernels that slowed rank first.
    found = service.diff_of(good.kernel_profile, probe.kernel_profile, toward="slower")
    return ProbeKernelDiffRead(
        localization_id=localization_id,
        base_position=good.position,
        position=position,
        diff=found,
    )
