"""Regressions found in series, the alert groups that collect them, and anomalous runs."""

from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import JSON, Boolean, Float, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.anomalies.detectors import SHAPES
from app.benchmarks.models import Benchmark, Machine, Series
from app.core.db import Base, UTCDateTime, utcnow
from app.kernels.diff import Way

# Triage states, most pressing first (a group shows its most pressing member's). ``infra``: the
# machine moved, not the code; ``downstream``: the same change seen on another branch or
# channel (its group is linked); ``duplicate``: of another group (linked).
STATUSES = (
    "new", "acknowledged", "infra", "fixed", "downstream", "duplicate", "expected", "invalid"
)  # fmt: skip
LINKED_STATUSES = ("duplicate", "downstream")  # a status that names another alert group
# How sure detection is of a step: reported early, confirmed by the test, or taken back.
STEP_STATES = ("suspected", "confirmed", "withdrawn")


class Triaged:
    """What triage sets on a finding (a group or one of its regressions), and when it was found."""

    assignee: Mapped[str] = mapped_column(String(128), default="")
    note: Mapped[str] = mapped_column(Text, default="")
    bug_url: Mapped[str] = mapped_column(Text, default="")
    # Who last triaged it (the token, and the dashboard session if it came from one), and when.
    triaged_by: Mapped[str] = mapped_column(String(200), default="")
    triaged_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # The alert group a ``duplicate`` or ``downstream`` finding points at (None otherwise).
    related_group_id: Mapped[int | None] = mapped_column(ForeignKey("alert_group.id"))


class AlertGroup(Triaged, Base):
    """Regressions of one machine and channel whose first bad runs fall in one window."""

    __tablename__ = "alert_group"

    id: Mapped[int] = mapped_column(primary_key=True)
    machine_id: Mapped[int] = mapped_column(ForeignKey("machine.id"), index=True)
    channel: Mapped[str] = mapped_column(String(64))
    first_bad_run_id: Mapped[int] = mapped_column(ForeignKey("run.id"), index=True)
    last_good_run_id: Mapped[int] = mapped_column(ForeignKey("run.id"))
    environment_diff: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)

    regressions: Mapped[list["Regression"]] = relationship(
        back_populates="group",
        lazy="selectin",
        order_by="Regression.id",
        foreign_keys="Regression.group_id",
    )
    failures: Mapped[list["CaseFailure"]] = relationship(
        back_populates="group",
        lazy="selectin",
        order_by="CaseFailure.id",
        foreign_keys="CaseFailure.group_id",
    )
    silences: Mapped[list["MachineSilence"]] = relationship(
        back_populates="group",
        lazy="selectin",
        order_by="MachineSilence.id",
        foreign_keys="MachineSilence.group_id",
    )
    aggregates: Mapped[list["AggregateFinding"]] = relationship(
        back_populates="group",
        lazy="selectin",
        order_by="AggregateFinding.id",
        foreign_keys="AggregateFinding.group_id",
    )


class Regression(Triaged, Base):
    """A step in a series; ``direction`` says whether it hurts or helps.

    ``state``: ``suspected`` when the newest points left the series' level by far more than
    its noise, before the change-point test can judge them; ``confirmed`` when the test
    agrees (every step the detectors find starts here); ``withdrawn`` when a suspected step
    came back or the test disagreed. ``confirmation``: how it got there (the re-run of the
    cases, the test's verdict), empty for a step found confirmed.
    """

    __tablename__ = "regression"
    __table_args__ = (UniqueConstraint("series_id", "first_bad_run_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    series_id: Mapped[int] = mapped_column(ForeignKey("series.id"), index=True)
    group_id: Mapped[int] = mapped_column(ForeignKey("alert_group.id"), index=True)
    last_good_run_id: Mapped[int] = mapped_column(ForeignKey("run.id"))
    first_bad_run_id: Mapped[int] = mapped_column(ForeignKey("run.id"), index=True)
    # regression | improvement | change, or a shape change's kind: noise | bimodal
    direction: Mapped[str] = mapped_column(String(16))
    before: Mapped[float] = mapped_column(Float)
    after: Mapped[float] = mapped_column(Float)
    before_spread: Mapped[float] = mapped_column(Float)
    after_spread: Mapped[float] = mapped_column(Float)
    rel_change: Mapped[float] = mapped_column(Float)
    p_value: Mapped[float] = mapped_column(Float)
    detector: Mapped[dict[str, Any]] = mapped_column(JSON)  # the settings that found it
    environment_diff: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    hints: Mapped[list[str]] = mapped_column(JSON, default=list)
    status: Mapped[str] = mapped_column(String(16), default="new", index=True)
    state: Mapped[str] = mapped_column(String(16), default="confirmed", index=True)
    confirmation: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    reverted: Mapped[bool] = mapped_column(Boolean, default=False)
    reverted_by_run_id: Mapped[int | None] = mapped_column(ForeignKey("run.id"))
    # The run whose detection confirmed the step (None: a rescan); later than the first bad
    # run when the new level needed more points to be confirmed.
    found_by_run_id: Mapped[int | None] = mapped_column(ForeignKey("run.id"), index=True)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)

    series: Mapped[Series] = relationship(lazy="joined")
    group: Mapped[AlertGroup] = relationship(back_populates="regressions", foreign_keys=[group_id])

    @property
    def is_shape(self) -> bool:
        """Whether it is a shape change (noise, bimodal): spreads moved, not the level."""
        return self.direction in SHAPES

    @property
    def kind(self) -> str:
        """What a notice calls it: ``improvement``, ``regression``, ``noise`` or ``bimodal``.

        A step of a metric with no better way (``change``) is told as a regression.
        """
        if self.is_shape or self.direction == "improvement":
            return self.direction
        return "regression"

    @property
    def kernel_way(self) -> Way | None:
        """The way the case's kernels moved with the step (``kernels.diff``).

        A regression's slower, an improvement's faster; None where the step has no better way
        or is a shape change.
        """
        if self.direction == "regression":
            return "slower"
        if self.direction == "improvement":
            return "faster"
        return None


class CaseFailure(Triaged, Base):
    """A case (a benchmark on a machine and channel) that passed and now fails.

    ``failure``: ``failed`` (a result failed: an error, OOM, a timeout; ``reason`` says which)
    or ``accuracy`` (its accuracy check stopped passing; ``reason`` holds the outcome). It
    ends by itself when the case passes again (``passing_again_run_id``); triage works as on
    a regression. ``flaky``: the case flipped between passing and failing in its recent runs,
    so it is reported once as flaky rather than at every flip.

    Coverage changes (``failures.judge_coverage``) are findings of lower severity: ``removed``
    (the case, or a model's cases, or a suite's when many went at once, no longer reported;
    ``last_passing_run_id`` is the run that last had it) and ``added`` (new to the machine and
    channel; ``last_passing_run_id`` is the run compared with). Both end when the case
    reports again in a later run.
    """

    COVERAGE: ClassVar[tuple[str, ...]] = ("removed", "added")

    __tablename__ = "case_failure"
    __table_args__ = (
        UniqueConstraint(
            "benchmark_id",
            "machine_id",
            "channel",
            "first_failing_run_id",
            name="uq_case_failure_case_first_failing_run",  # the convention's is too long
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    group_id: Mapped[int] = mapped_column(ForeignKey("alert_group.id"), index=True)
    benchmark_id: Mapped[int] = mapped_column(ForeignKey("benchmark.id"), index=True)
    machine_id: Mapped[int] = mapped_column(ForeignKey("machine.id"))
    channel: Mapped[str] = mapped_column(String(64))
    last_passing_run_id: Mapped[int] = mapped_column(ForeignKey("run.id"))
    first_failing_run_id: Mapped[int] = mapped_column(ForeignKey("run.id"), index=True)
    passing_again_run_id: Mapped[int | None] = mapped_column(ForeignKey("run.id"))
    failure: Mapped[str] = mapped_column(String(16))  # failed | accuracy | removed | added
    metric: Mapped[str] = mapped_column(String(128))  # the result that failed
    reason: Mapped[str] = mapped_column(Text, default="")
    flaky: Mapped[bool] = mapped_column(Boolean, default=False)
    status: Mapped[str] = mapped_column(String(16), default="new", index=True)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)

    benchmark: Mapped[Benchmark] = relationship(lazy="joined")
    machine: Mapped[Machine] = relationship(lazy="joined")
    group: Mapped[AlertGroup] = relationship(back_populates="failures", foreign_keys=[group_id])

    @property
    def severity(self) -> str:
        """``low`` for a coverage change (nothing broke), ``high`` for a failing case."""
        return "low" if self.failure in self.COVERAGE else "high"


class MachineSilence(Triaged, Base):
    """A machine and channel that stopped reporting: two of its runs missed.

    Its group holds it alone (both of the group's runs are the last run before the silence),
    so that the findings of the runs after it are grouped as usual. It ends by itself when a
    run arrives (``ended_by_run_id``).
    """

    __tablename__ = "machine_silence"
    __table_args__ = (UniqueConstraint("machine_id", "channel", "last_run_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    group_id: Mapped[int] = mapped_column(ForeignKey("alert_group.id"), index=True)
    machine_id: Mapped[int] = mapped_column(ForeignKey("machine.id"), index=True)
    channel: Mapped[str] = mapped_column(String(64))
    last_run_id: Mapped[int] = mapped_column(ForeignKey("run.id"))
    expected_every_s: Mapped[float] = mapped_column(Float)  # learned from its runs
    silent_since: Mapped[datetime] = mapped_column(UTCDateTime)  # the last run's start
    ended_by_run_id: Mapped[int | None] = mapped_column(ForeignKey("run.id"))
    status: Mapped[str] = mapped_column(String(16), default="new", index=True)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)

    machine: Mapped[Machine] = relationship(lazy="joined")
    group: Mapped[AlertGroup] = relationship(back_populates="silences", foreign_keys=[group_id])


class RunAnomaly(Base):
    """The secondary signal: how unusual a run's metric vector is (IsolationForest)."""

    __tablename__ = "run_anomaly"

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("run.id"), unique=True)
    score: Mapped[float] = mapped_column(Float)  # below 0 is anomalous (core.isolation)
    anomalous: Mapped[bool] = mapped_column(Boolean)
    features: Mapped[dict[str, float]] = mapped_column(JSON)
    history_runs: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class AggregatePoint(Base):
    """One dashboard aggregate of one group of models in one run (DESIGN.md §9).

    A group is a suite x config x precision x mode on the run's machine and channel; ``stat``
    is ``pass_rate``, ``geomean_speedup``, ``mean_compile_time_s`` or
    ``mean_compression_ratio``. Written when the run is detected, from its stored results, so
    each aggregate is a series of its own without reading every model's results again.
    ``model_count``: the models the value is over (all the group's models for the pass rate,
    the passing models with a value for the others).
    """

    __tablename__ = "aggregate_point"
    __table_args__ = (
        UniqueConstraint(
            "run_id",
            "suite",
            "config",
            "precision",
            "mode",
            "stat",
            name="uq_aggregate_point_run_group_stat",  # the convention's is too long
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("run.id"), index=True)
    machine_id: Mapped[int] = mapped_column(ForeignKey("machine.id"))
    channel: Mapped[str] = mapped_column(String(64))
    suite: Mapped[str] = mapped_column(String(128))
    config: Mapped[str] = mapped_column(String(128))
    precision: Mapped[str] = mapped_column(String(16))
    mode: Mapped[str] = mapped_column(String(16))
    stat: Mapped[str] = mapped_column(String(32))
    value: Mapped[float] = mapped_column(Float)
    model_count: Mapped[int] = mapped_column(Integer)


class AggregateFinding(Triaged, Base):
    """A dashboard aggregate of a group of models that got worse.

    ``rule``: ``step`` (the change-point detector on the aggregate's own series),
    ``pass_rate_below`` (under 90% after a run at or above it), ``speedup_below_base`` or
    ``compression_below_base`` (under 0.95x or 0.9x of the base: the previous run's value over
    the models both runs have). It ends by itself when the aggregate recovers
    (``resolved_run_id``). ``explained_by``: the per-model findings of the group's cases near
    its first bad run, ``{"regressions": [ids], "failures": [ids]}``.
    """

    __tablename__ = "aggregate_finding"
    __table_args__ = (
        UniqueConstraint(
            "machine_id",
            "channel",
            "suite",
            "config",
            "precision",
            "mode",
            "stat",
            "rule",
            "first_bad_run_id",
            name="uq_aggregate_finding_series_rule_first_bad_run",
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    group_id: Mapped[int] = mapped_column(ForeignKey("alert_group.id"), index=True)
    machine_id: Mapped[int] = mapped_column(ForeignKey("machine.id"), index=True)
    channel: Mapped[str] = mapped_column(String(64))
    suite: Mapped[str] = mapped_column(String(128))
    config: Mapped[str] = mapped_column(String(128))
    precision: Mapped[str] = mapped_column(String(16))
    mode: Mapped[str] = mapped_column(String(16))
    stat: Mapped[str] = mapped_column(String(32))
    rule: Mapped[str] = mapped_column(String(32))
    before: Mapped[float] = mapped_column(Float)
    after: Mapped[float] = mapped_column(Float)
    rel_change: Mapped[float] = mapped_column(Float)
    last_good_run_id: Mapped[int] = mapped_column(ForeignKey("run.id"))
    first_bad_run_id: Mapped[int] = mapped_column(ForeignKey("run.id"), index=True)
    resolved_run_id: Mapped[int | None] = mapped_column(ForeignKey("run.id"))
    explained_by: Mapped[dict[str, list[int]]] = mapped_column(JSON, default=dict)
    status: Mapped[str] = mapped_column(String(16), default="new", index=True)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)

    machine: Mapped[Machine] = relationship(lazy="joined")
    group: Mapped[AlertGroup] = relationship(back_populates="aggregates", foreign_keys=[group_id])


class SeriesSensitivity(Base):
    """How sensitive detection is on one series: learnt from its triage, or pinned by a person.

    ``factor`` multiplies the change-point detector's minimum effect on the series
    (``sensitivity``): above 1 when people marked most of its findings invalid, under 1
    when they recorded steps it missed. ``learning`` off keeps it at 1; ``pinned`` holds
    thresholds a person set, which replace the learnt ones. Every change is in the audit log.
    """

    __tablename__ = "series_sensitivity"

    series_id: Mapped[int] = mapped_column(ForeignKey("series.id"), primary_key=True)
    factor: Mapped[float] = mapped_column(Float, default=1.0)
    learning: Mapped[bool] = mapped_column(Boolean, default=True)
    pinned: Mapped[dict[str, float] | None] = mapped_column(JSON)
    reason: Mapped[str] = mapped_column(Text, default="")
    updated_by: Mapped[str] = mapped_column(String(200), default="")
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
