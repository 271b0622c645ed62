"""The catalog: machines, compiler configs, benchmarks, metrics and the series they form."""

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, Float, ForeignKey, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.core.db import Base, UTCDateTime, utcnow
from app.core.names import DEFAULT_PROJECT, PROJECT_LENGTH


class Machine(Base):
    """A hardware configuration whose results are comparable with each other."""

    __tablename__ = "machine"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    device: Mapped[str] = mapped_column(String(16))
    arch: Mapped[str] = mapped_column(String(256), default="")
    arch_short: Mapped[str] = mapped_column(String(64), default="")
    gpu_count: Mapped[int | None] = mapped_column(Integer)
    gpu_memory_gb: Mapped[float | None] = mapped_column(Float)
    cpu: Mapped[str] = mapped_column(String(256), default="")
    cpu_count: Mapped[int | None] = mapped_column(Integer)
    host_memory_gb: Mapped[float | None] = mapped_column(Float)
    extra: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class CompilerConfig(Base):
    """A named set of compile options (``cudagraphs``, ``dynamic``, ...)."""

    __tablename__ = "compiler_config"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    options: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


# The fields that name a measured case in a result row (``params`` aside): what a worker
# writes for each case it measures (``workers.harness.identity``) and what a re-run or a
# localization asks it to measure again.
CASE_IDENTITY = ("suite", "model", "category", "mode", "precision", "config", "batch_size")


class Benchmark(Base):
    """One measured case: a model in a suite, run one way (mode, precision, config, batch)."""

    __tablename__ = "benchmark"

    id: Mapped[int] = mapped_column(primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(64), unique=True)
    suite: Mapped[str] = mapped_column(String(128), index=True)
    model: Mapped[str] = mapped_column(String(256), index=True)
    category: Mapped[str] = mapped_column(String(64), default="")
    mode: Mapped[str] = mapped_column(String(16))
    precision: Mapped[str] = mapped_column(String(16))
    compiler_config_id: Mapped[int] = mapped_column(ForeignKey("compiler_config.id"))
    batch_size: Mapped[int | None] = mapped_column(Integer)
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)

    compiler_config: Mapped[CompilerConfig] = relationship(lazy="joined")

    @property
    def config(self) -> str:
        """The compiler config's canonical name."""
        return self.compiler_config.name

    def identity(self) -> dict[str, Any]:
        """The case as a result row names it (``CASE_IDENTITY``)."""
        return {name: getattr(self, name) for name in CASE_IDENTITY}


class Metric(Base):
    """What is measured: unit, direction and kind."""

    __tablename__ = "metric"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    unit: Mapped[str] = mapped_column(String(32), default="")
    higher_is_better: Mapped[bool | None] = mapped_column(Boolean)
    kind: Mapped[str] = mapped_column(String(16), default="performance")


class Series(Base):
    """The history a detector reads and a chart draws.

    Benchmark x metric x machine x channel x project: two projects' results on one machine
    never share a history (``projects``).
    """

    __tablename__ = "series"
    __table_args__ = (
        UniqueConstraint("benchmark_id", "metric_id", "machine_id", "channel", "project"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    benchmark_id: Mapped[int] = mapped_column(ForeignKey("benchmark.id"), index=True)
    metric_id: Mapped[int] = mapped_column(ForeignKey("metric.id"), index=True)
    machine_id: Mapped[int] = mapped_column(ForeignKey("machine.id"), index=True)
    channel: Mapped[str] = mapped_column(String(64))
    project: Mapped[str] = mapped_column(
        String(PROJECT_LENGTH), default=DEFAULT_PROJECT, server_default=DEFAULT_PROJECT
    )

    benchmark: Mapped[Benchmark] = relationship(lazy="joined")
    metric: Mapped[Metric] = relationship(lazy="joined")
    machine: Mapped[Machine] = relationship(lazy="joined")

    @property
    def machine_name(self) -> str:
        """The machine's name."""
        return self.machine.name


class CatalogGeneration(Base):
    """One row whose token changes whenever remembered catalog ids may have gone wrong.

    ``benchmarks.known_ids`` keeps benchmark and series ids across requests under this token.
    Creating benchmarks or series changes it (``known_ids.publish_changes``); deleting them,
    truncating their tables or changing their keys changes it too, by database triggers
    (migration ``9d1f4c2b7e60``), whoever does it.
    """

    __tablename__ = "catalog_generation"

    id: Mapped[int] = mapped_column(primary_key=True)
    token: Mapped[str] = mapped_column(String(32))
