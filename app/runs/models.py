"""Runs, the software environment they ran in, and their results."""

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.benchmarks.models import Machine
from app.core.db import Base, UTCDateTime, utcnow
from app.core.names import DEFAULT_PROJECT, PROJECT_LENGTH

INVALID = "invalid"  # Run.status of a run an admin took out of history


class Environment(Base):
    """A software stack, stored once per distinct content (``content_hash``)."""

    __tablename__ = "environment"

    id: Mapped[int] = mapped_column(primary_key=True)
    content_hash: Mapped[str] = mapped_column(String(64), unique=True)
    channel: Mapped[str] = mapped_column(String(64), index=True)
    torch: Mapped[str] = mapped_column(String(128), default="")
    torch_git_sha: Mapped[str] = mapped_column(String(64), default="")
    triton: Mapped[str] = mapped_column(String(128), default="")
    python: Mapped[str] = mapped_column(String(64), default="")
    cuda: Mapped[str] = mapped_column(String(64), default="")
    hip: Mapped[str] = mapped_column(String(64), default="")
    driver: Mapped[str] = mapped_column(String(128), default="")
    packages: Mapped[dict[str, str]] = mapped_column(JSON, default=dict)
    compiler_options: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    extra: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class Run(Base):
    """One execution on one machine in one environment.

    ``(project, key)`` is its identity and makes ingestion idempotent: the key is the one the
    client sent, so two projects' CI jobs may use the same keys.
    """

    __tablename__ = "run"
    __table_args__ = (
        Index("ix_run_started_at_id", "started_at", "id"),
        UniqueConstraint("project", "key"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    key: Mapped[str] = mapped_column(String(256))
    payload_hash: Mapped[str] = mapped_column(String(64))
    machine_id: Mapped[int] = mapped_column(ForeignKey("machine.id"), index=True)
    environment_id: Mapped[int] = mapped_column(ForeignKey("environment.id"), index=True)
    channel: Mapped[str] = mapped_column(String(64), index=True)
    project: Mapped[str] = mapped_column(
        String(PROJECT_LENGTH), default=DEFAULT_PROJECT, server_default=DEFAULT_PROJECT, index=True
    )
    trigger: Mapped[str] = mapped_column(String(16))
    tier: Mapped[str] = mapped_column(String(32), default="")
    commit: Mapped[str] = mapped_column(String(64), default="")
    branch: Mapped[str] = mapped_column(String(256), default="")
    url: Mapped[str] = mapped_column(Text, default="")
    hostname: Mapped[str] = mapped_column(String(256), default="")
    # "partial" while a sharded run waits for shards (not detected, not on the overview);
    # "invalid" when an admin took it out of history (its results moved to invalidated_result).
    status: Mapped[str] = mapped_column(String(16), default="completed")
    invalidated_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    invalidated_by: Mapped[str] = mapped_column(String(200), default="")
    invalidated_reason: Mapped[str] = mapped_column(Text, default="")
    source: Mapped[str] = mapped_column(String(128), default="")
    expected_shards: Mapped[int | None] = mapped_column(Integer)  # as the uploads declared
    base_commit: Mapped[str] = mapped_column(String(64), default="")  # a branch's fork point
    # Why the run is stored as a branch ("": the default branch's); shown on the run page.
    branch_reason: Mapped[str] = mapped_column(String(512), default="", server_default="")
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # When detection last judged this run's points (None: not yet).
    detected_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    cases_attempted: Mapped[int] = mapped_column(Integer, default=0)
    cases_passed: Mapped[int] = mapped_column(Integer, default=0)
    cases_failed: Mapped[int] = mapped_column(Integer, default=0)
    cases_skipped: Mapped[int] = mapped_column(Integer, default=0)
    result_count: Mapped[int] = mapped_column(Integer, default=0)
    extra: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)

    machine: Mapped[Machine] = relationship(lazy="joined")
    environment: Mapped[Environment] = relationship(lazy="joined")

    @property
    def coverage(self) -> dict[str, int]:
        """Cases attempted, passed, failed and skipped."""
        return {
            "attempted": self.cases_attempted,
            "passed": self.cases_passed,
            "failed": self.cases_failed,
            "skipped": self.cases_skipped,
        }


class Result(Base):
    """One value of one series in one run, with its raw samples and status.

    The biggest table by far, written only by the ingest service in the transaction that
    resolved its run and series. It has no foreign-key constraints on purpose: their per-row
    trigger checks are a large part of a bulk COPY's cost, and nothing else writes here.
    Deleting a run deletes its results explicitly. Nor has it a surrogate id: (run, series)
    is its key, and every further index is one more to maintain on each COPY.
    """

    __tablename__ = "result"
    __table_args__ = (Index("ix_result_series_id_measured_at", "series_id", "measured_at"),)

    run_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    series_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    measured_at: Mapped[datetime] = mapped_column(UTCDateTime)
    status: Mapped[str] = mapped_column(String(16), default="ok")
    value: Mapped[float | None] = mapped_column(Float)
    samples: Mapped[list[float] | None] = mapped_column(JSON)
    text_value: Mapped[str | None] = mapped_column(String(256))
    reason: Mapped[str] = mapped_column(Text, default="")
    extra: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # The samples' median absolute deviation over their median (``core.spread``), kept so
    # that detection reads a float per point, not the samples; None without 3 samples.
    spread: Mapped[float | None] = mapped_column(Float)


class InvalidatedResult(Base):
    """A result of an invalidated run, kept out of ``result`` so no reader of history sees it.

    Same columns as ``Result``; restoring the run moves them back, deleting it drops them.
    """

    __tablename__ = "invalidated_result"

    run_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    series_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    measured_at: Mapped[datetime] = mapped_column(UTCDateTime)
    status: Mapped[str] = mapped_column(String(16), default="ok")
    value: Mapped[float | None] = mapped_column(Float)
    samples: Mapped[list[float] | None] = mapped_column(JSON)
    text_value: Mapped[str | None] = mapped_column(String(256))
    reason: Mapped[str] = mapped_column(Text, default="")
    extra: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # The samples' median absolute deviation over their median (``core.spread``), kept so
    # that detection reads a float per point, not the samples; None without 3 samples.
    spread: Mapped[float | None] = mapped_column(Float)


class RunShard(Base):
    """One CI job's part of a sharded run: its upload, so a retry is known and the run whole.

    A workflow's shard jobs upload under the workflow's key, each naming itself; the run is
    one, and it is complete when ``Run.expected_shards`` shards are in (or none came for a
    while: ``shards.complete_quiet_runs``).
    """

    __tablename__ = "run_shard"
    __table_args__ = (UniqueConstraint("run_id", "name"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(128))
    payload_hash: Mapped[str] = mapped_column(String(64))
    result_count: Mapped[int] = mapped_column(Integer, default=0)  # results it added
    duplicates: Mapped[int] = mapped_column(Integer, default=0)  # results another shard had
    received_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
