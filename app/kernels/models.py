"""A case's kernel profile in a run: evidence kept beside the run, never a series.

One row per (run, benchmark): the kernels a profiler saw in the case's calls, under their
normalised identity (``identity``), with the time of a call around them. The figures are
per profiled call. They explain a run's results; detection and baselines never read them.
"""

from typing import Any

from sqlalchemy import JSON, Float, ForeignKey, Integer, LargeBinary, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.benchmarks.models import Benchmark
from app.core.db import Base

TIMINGS = ("device", "cpu_self")  # kernel duration on the device; self CPU time on the host


class KernelProfile(Base):
    """The kernels of one case in one run."""

    __tablename__ = "kernel_profile"
    __table_args__ = (UniqueConstraint("run_id", "benchmark_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    # The unique constraint's index serves a run's lookups.
    run_id: Mapped[int] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"))
    benchmark_id: Mapped[int] = mapped_column(
        ForeignKey("benchmark.id", ondelete="CASCADE"), index=True
    )
    timing: Mapped[str] = mapped_column(String(16))  # one of TIMINGS
    calls: Mapped[int] = mapped_column(Integer)  # profiled calls the figures average over
    wall_us: Mapped[float] = mapped_column(Float)  # one call, start to finish
    kernel_us: Mapped[float] = mapped_column(Float)  # the listed kernels, summed
    other_us: Mapped[float] = mapped_column(Float, default=0.0)  # kernels past the list
    graphs: Mapped[int | None] = mapped_column(Integer)
    recompiles: Mapped[int | None] = mapped_column(Integer)
    # [{kind, name, graph, instances, calls, time_us, names}], slowest first (service.Kernel)
    kernels: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)

    benchmark: Mapped[Benchmark] = relationship(lazy="joined")


class KernelCode(Base):
    """What Inductor generated for one case in one run: graphs and kernels, compressed.

    Kept like raw samples: retention clears it with them (BENCHWATCH_RETAIN_SAMPLES_DAYS).
    """

    __tablename__ = "kernel_code"
    __table_args__ = (UniqueConstraint("run_id", "benchmark_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"))
    benchmark_id: Mapped[int] = mapped_column(
        ForeignKey("benchmark.id", ondelete="CASCADE"), index=True
    )
    graphs: Mapped[int] = mapped_column(Integer)  # output codes kept
    kernels: Mapped[int] = mapped_column(Integer)  # kernel sources kept
    size: Mapped[int] = mapped_column(Integer)  # characters, before compression
    # zlib of the JSON {"graphs": [code], "kernels": [{name, source, launch}]}
    compressed: Mapped[bytes] = mapped_column(LargeBinary)
