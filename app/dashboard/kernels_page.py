"""The kernel diff page: one case's kernels from a base run to a head run (or a regression's).

Kernel names come from uploads and profilers: the template escapes them, and the chart's
labels go through ``figures.text``. Every figure is per profiled call, in microseconds.
"""

from typing import Any

from sqlalchemy import select, tuple_
from sqlalchemy.orm import Session

from app.anomalies.models import Regression
from app.benchmarks.models import Benchmark
from app.core.errors import NotFound
from app.dashboard import page_figures
from app.kernels import code as kernel_code
from app.kernels import service as kernels
from app.kernels.diff import KernelDiff, Way
from app.kernels.identity import Identity
from app.kernels.models import KernelProfile

CHANGE_WORDS = {
    "appeared": "new",
    "disappeared": "gone",
    "slower": "slower",
    "faster": "faster",
    "same": "same",
}


def kernels_page(
    session: Session,
    base_run: int,
    head_run: int,
    benchmark_id: int,
    head_benchmark_id: int | None = None,
    toward: Way | None = None,
) -> dict[str, Any]:
    """The kernel diff of one case between two runs (or two cases: two configs), as shown."""
    head_case = head_benchmark_id or benchmark_id
    found = kernels.case_diff(session, base_run, head_run, benchmark_id, head_case, toward)
    try:
        code = kernel_code.case_code_diff(session, base_run, head_run, benchmark_id, head_case)
    except NotFound:  # eager, a CI run without code, or cleared by retention
        code = None
    page = _page(found.diff, found.benchmark, base_run, head_run)
    head = session.get(Benchmark, head_case) if head_case != benchmark_id else None
    return page | {"regression": None, "code": code, "head_benchmark": head}


def regression_kernels_page(session: Session, regression_id: int) -> dict[str, Any]:
    """A regression's kernel diff: its last good run to its first bad run."""
    regression = session.get(Regression, regression_id)
    if regression is None:
        raise NotFound(f"regression {regression_id} not found")
    page = kernels_page(
        session,
        regression.last_good_run_id,
        regression.first_bad_run_id,
        regression.series.benchmark_id,
        toward=regression.kernel_way,
    )
    return page | {"regression": regression}


def _page(found: KernelDiff, benchmark: Benchmark, base_run: int, head_run: int) -> dict[str, Any]:
    rows = [
        {
            "identity": str(Identity(k.kind, k.name)),
            "kind": k.kind,
            "change": CHANGE_WORDS[k.change],
            "base_us": k.base_us,
            "head_us": k.head_us,
            "delta_us": k.delta_us,
            "relative": k.relative,
            "share": k.share,
            "calls": (k.base_calls, k.head_calls),
            "names": k.names,
        }
        for k in found.kernels
    ]
    return {
        "benchmark": benchmark,
        "base_run": base_run,
        "head_run": head_run,
        "diff": found,
        "rows": rows,
        "chart": page_figures.kernel_waterfall(found),
    }


def profiled(session: Session, pairs: set[tuple[int, int]]) -> set[tuple[int, int]]:
    """Of the (run, benchmark) pairs, those with a kernel profile; one statement."""
    if not pairs:
        return set()
    query = select(KernelProfile.run_id, KernelProfile.benchmark_id).where(
        tuple_(KernelProfile.run_id, KernelProfile.benchmark_id).in_(sorted(pairs))
    )
    return {(run_id, benchmark_id) for run_id, benchmark_id in session.execute(query)}


def profiled_steps(session: Session, regressions: list[Regression]) -> set[int]:
    """The regressions whose two runs both kept a profile of their case.

    The alerts page links their kernel diff.
    """
    sides = {
        r.id: {
            (run_id, r.series.benchmark_id) for run_id in (r.last_good_run_id, r.first_bad_run_id)
        }
        for r in regressions
    }
    held = profiled(session, set().union(*sides.values()) if sides else set())
    return {regression for regression, pairs in sides.items() if pairs <= held}
