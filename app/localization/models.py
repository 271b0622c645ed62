"""A localization and its probes: evidence kept beside the finding it serves.

A localization belongs to one finding (a regression; a failure; an aggregate finding through
the regression it was started for) and to the suite run of trigger ``localize`` that a
worker of the finding's machine executes. Its probes are the environments it measured, each
with its samples and its decision: they are never results, so they never enter a series, a
baseline or detection.
"""

from datetime import datetime
from typing import Any, Literal, get_args

from sqlalchemy import JSON, Float, ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.core.db import Base, UTCDateTime, utcnow
from app.core.names import DEFAULT_PROJECT, PROJECT_LENGTH

# What a localization is doing or found (docs/localize.md says what each means).
State = Literal["queued", "running", "culprit_found", "not_reproduced", "inconclusive", "failed"]
QUEUED, RUNNING, FAILED = "queued", "running", "failed"
UNFINISHED = (QUEUED, RUNNING)
STATES: tuple[State, ...] = get_args(State)


class Localization(Base):
    """One search for what change caused a finding."""

    __tablename__ = "localization"

    id: Mapped[int] = mapped_column(primary_key=True)
    # What it was started for: the finding's kind and id, and the regression it measures.
    finding_kind: Mapped[str] = mapped_column(String(16))  # regression | failure | aggregate
    finding_id: Mapped[int] = mapped_column(Integer)
    regression_id: Mapped[int | None] = mapped_column(
        ForeignKey("regression.id", ondelete="CASCADE"), index=True
    )
    case_failure_id: Mapped[int | None] = mapped_column(
        ForeignKey("case_failure.id", ondelete="CASCADE"), index=True
    )
    aggregate_finding_id: Mapped[int | None] = mapped_column(
        ForeignKey("aggregate_finding.id", ondelete="CASCADE"), index=True
    )
    group_id: Mapped[int | None] = mapped_column(
        ForeignKey("alert_group.id", ondelete="SET NULL"), index=True
    )
    suite_run_id: Mapped[int | None] = mapped_column(
        ForeignKey("suite_run.id", ondelete="SET NULL"), index=True
    )
    machine: Mapped[str] = mapped_column(String(128), index=True)
    project: Mapped[str] = mapped_column(String(PROJECT_LENGTH), default=DEFAULT_PROJECT)
    good_run_id: Mapped[int | None] = mapped_column(ForeignKey("run.id", ondelete="SET NULL"))
    bad_run_id: Mapped[int | None] = mapped_column(ForeignKey("run.id", ondelete="SET NULL"))
    # The case measured (suite, model, config, ...; metric, unit, higher_is_better), and the
    # last good and first bad environments it is measured between.
    case: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    good_environment: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    bad_environment: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    state: Mapped[str] = mapped_column(String(16), default=QUEUED, index=True)
    started_by: Mapped[str] = mapped_column(String(200), default="")  # "auto" or who asked
    # The worker running it and its attempt's lease, renewed while it measures: once the
    # lease lapses (its worker died) another attempt may take it over.
    worker: Mapped[str] = mapped_column(String(256), default="")
    lease_id: Mapped[str] = mapped_column(String(32), default="")
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    reason: Mapped[str] = mapped_column(Text, default="")
    # The answer: strategy, culprit (kind, names, versions, commit title, author, link),
    # the pre-flight's figures, the commits still suspected of an inconclusive bisection.
    answer: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    probe_count: Mapped[int] = mapped_column(Integer, default=0)
    repeats: Mapped[int] = mapped_column(Integer, default=0)
    builds: Mapped[int] = mapped_column(Integer, default=0)
    samples: Mapped[int] = mapped_column(Integer, default=0)
    requested_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    probes: Mapped[list["LocalizationProbe"]] = relationship(
        back_populates="localization",
        cascade="all, delete-orphan",
        order_by="LocalizationProbe.position",
    )


class LocalizationProbe(Base):
    """One environment a localization measured, its samples and how it was judged."""

    __tablename__ = "localization_probe"

    id: Mapped[int] = mapped_column(primary_key=True)
    localization_id: Mapped[int] = mapped_column(
        ForeignKey("localization.id", ondelete="CASCADE"), index=True
    )
    position: Mapped[int] = mapped_column(Integer)  # its order in the localization
    strategy: Mapped[str] = mapped_column(String(16))  # preflight | isolate | bisect | settings
    label: Mapped[str] = mapped_column(String(256))
    spec: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    # good | bad | halfway | unknown | build_failed | reference
    outcome: Mapped[str] = mapped_column(String(16))
    samples: Mapped[list[float]] = mapped_column(JSON, default=list)
    p_good: Mapped[float | None] = mapped_column(Float)
    p_bad: Mapped[float | None] = mapped_column(Float)
    step_position: Mapped[float | None] = mapped_column(Float)  # 0 good, 1 bad
    effect: Mapped[float | None] = mapped_column(Float)  # against the good median
    rounds: Mapped[int] = mapped_column(Integer, default=1)
    reason: Mapped[str] = mapped_column(Text, default="")
    measured_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # The case's kernel profile in this environment (its last round), as a run's is stored
    # (``app.kernels``): None where the probe's command gave none.
    kernel_profile: Mapped[dict[str, Any] | None] = mapped_column(JSON)

    localization: Mapped[Localization] = relationship(back_populates="probes")
