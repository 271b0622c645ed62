"""A suite run in progress and its shards (leases, attempts, the rows each shard measured)."""

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.core.db import Base, UTCDateTime, utcnow

SHARD_STATES = ("pending", "running", "done", "failed")
# A confirmation re-run of suspected cases: its samples are pooled into the suspect run
# (``app.anomalies.confirmation``), never ingested as a run of their own.
RERUN_TRIGGER = "confirm"
# Cases a comparison could not decide, measured again on the run's machine and stack
# (``app.suite_runs.compare_reruns``): their samples are read beside the run's by the compare,
# never ingested.
COMPARE_TRIGGER = "compare"
# A localization's measurements (``app.localization``): its probes are kept beside the
# finding, the suite run only shows the work on the machine's queue; it has no shards and is
# never ingested.
LOCALIZE_TRIGGER = "localize"


class SuiteRun(Base):
    """One scheduled or triggered run of a tier on a machine, until its shards are in."""

    __tablename__ = "suite_run"

    id: Mapped[int] = mapped_column(primary_key=True)
    key: Mapped[str] = mapped_column(String(200), unique=True)
    machine: Mapped[str] = mapped_column(String(128), index=True)
    tier: Mapped[str] = mapped_column(String(32))
    trigger: Mapped[str] = mapped_column(String(32))
    # What the worker saw when it started: {"machine": {...}, "environment": {...}}.
    description: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16), default="running")  # running|finished|failed
    reason: Mapped[str] = mapped_column(Text, default="")  # why it failed
    started_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    run_id: Mapped[int | None] = mapped_column(ForeignKey("run.id", ondelete="SET NULL"))

    shards: Mapped[list["SuiteShard"]] = relationship(
        back_populates="suite_run", order_by="SuiteShard.position", cascade="all, delete-orphan"
    )


class SuiteShard(Base):
    """A group of cases run in one subprocess; a lease says which worker holds it, till when."""

    __tablename__ = "suite_shard"
    __table_args__ = (UniqueConstraint("suite_run_id", "position"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    suite_run_id: Mapped[int] = mapped_column(ForeignKey("suite_run.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)
    label: Mapped[str] = mapped_column(String(256))
    # The result identities it measures: [{"suite", "model", "category", "mode", ...}, ...].
    cases: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16), default="pending", index=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    worker: Mapped[str] = mapped_column(String(256), default="")
    lease_id: Mapped[str] = mapped_column(String(32), default="")  # the attempt holding it
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    reason: Mapped[str] = mapped_column(Text, default="")
    rows: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    suite_run: Mapped[SuiteRun] = relationship(back_populates="shards")
