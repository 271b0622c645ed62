"""Read and update models of regressions, failures, alert groups and run anomalies."""

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt

from app.benchmarks.schemas import SeriesRead
from app.core.bounds import NulFree, RowId
from app.core.urls import HttpUrlText

Status = Literal[
    "new", "acknowledged", "infra", "fixed", "downstream", "duplicate", "expected", "invalid"
]  # models.STATUSES
StepState = Literal["suspected", "confirmed", "withdrawn"]
AggregateStat = Literal[
    "pass_rate", "geomean_speedup", "mean_compile_time_s", "mean_compression_ratio"
]
AggregateRule = Literal["step", "pass_rate_below", "speedup_below_base", "compression_below_base"]
FailureKind = Literal["failed", "accuracy", "removed", "added"]
Severity = Literal["high", "low"]


class TriageRead(BaseModel):
    """The triage state of a finding, and when it was found."""

    assignee: str
    note: str
    bug_url: str
    triaged_by: str  # the token and, from the dashboard, the sign-in session
    triaged_at: datetime | None
    created_at: datetime
    related_group_id: int | None = Field(
        default=None, description="the group a duplicate or downstream finding is of"
    )


class RegressionRead(TriageRead):
    """A detected step with its runs, levels, explanation and triage state."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    group_id: int
    series: SeriesRead
    direction: str
    last_good_run_id: int
    first_bad_run_id: int
    before: float
    after: float
    before_spread: float
    after_spread: float
    rel_change: float
    p_value: float
    detector: dict[str, Any]
    environment_diff: dict[str, Any]
    hints: list[str]
    status: str
    state: str = Field(
        description="suspected (reported early), confirmed (by the change-point test) or "
        "withdrawn (a suspected step that came to nothing)"
    )
    confirmation: dict[str, Any] = Field(
        description="how it got to its state: suspected, confirmed, withdrawn, rerun"
    )
    reverted: bool
    reverted_by_run_id: int | None
    found_by_run_id: int | None = None
    updated_at: datetime


class CaseFailureRead(TriageRead):
    """A case that passed and now fails, or a coverage change: where, why, its runs, triage."""

    id: int
    group_id: int
    machine: str
    channel: str
    suite: str
    model: str
    category: str
    config: str
    precision: str
    mode: str
    batch_size: int | None
    failure: FailureKind = Field(
        description="failed (a result failed), accuracy (its accuracy stopped passing); "
        "coverage changes: removed (no longer reported; the runs are the last that reported "
        "it and the first that did not), added (new to the machine and channel)"
    )
    severity: Severity = Field(description="low for a coverage change, high for a failure")
    metric: str  # the result that failed ("" for a coverage change)
    reason: str
    flaky: bool
    last_passing_run_id: int
    first_failing_run_id: int
    passing_again_run_id: int | None  # set once the case passes again: the failure ended
    status: str
    updated_at: datetime


class AggregateFindingRead(TriageRead):
    """A dashboard aggregate of a group of models that got worse, and what explains it."""

    id: int
    group_id: int
    machine: str
    channel: str
    suite: str
    config: str
    precision: str
    mode: str
    stat: AggregateStat
    rule: AggregateRule = Field(
        description="step (the change-point detector on the aggregate's series), "
        "pass_rate_below (under 90%), speedup_below_base (under 0.95x of the previous run, "
        "over the models passing in both), compression_below_base (under 0.9x, likewise)"
    )
    before: float
    after: float
    rel_change: float
    last_good_run_id: int
    first_bad_run_id: int
    resolved_run_id: int | None = Field(description="The run where the aggregate recovered")
    explained_by: dict[str, list[int]] = Field(
        description="Ids of the per-model findings that explain it: regressions, failures"
    )
    status: str
    updated_at: datetime


class TriageUpdate(BaseModel):
    """Fields a triager may change; absent fields stay as they are."""

    model_config = ConfigDict(extra="forbid")

    status: Status | None = None
    assignee: Annotated[str, NulFree] | None = Field(default=None, max_length=128)
    note: Annotated[str, NulFree] | None = Field(default=None, max_length=10_000)
    bug_url: HttpUrlText | None = None
    related_group_id: RowId | None = Field(
        default=None,
        description="the alert group a `duplicate` or `downstream` finding is of (required "
        "with those statuses; any other status clears it)",
    )


BulkIdList = Annotated[list[RowId], Field(max_length=500)]
FilterText = Annotated[str, NulFree, Field(min_length=1, max_length=128)]


class BulkIds(BaseModel):
    """Findings picked by hand, by kind (500 in all at most)."""

    model_config = ConfigDict(extra="forbid")

    regressions: BulkIdList = []
    failures: BulkIdList = []
    aggregates: BulkIdList = Field(default=[], description="aggregate findings")
    groups: BulkIdList = Field(default=[], description="alert groups: all their findings")


class RegressionSelection(BaseModel):
    """The regressions a bulk triage changes: those ``GET /regressions`` lists with these."""

    model_config = ConfigDict(extra="forbid")

    status: Status | None = None
    machine: FilterText | None = None
    channel: FilterText | None = None
    suite: FilterText | None = None
    config: FilterText | None = None
    metric: FilterText | None = None
    direction: FilterText | None = None
    state: StepState | None = None
    group_id: RowId | None = None
    first_bad_run_id: RowId | None = None
    project: FilterText | None = None


class GroupSelection(BaseModel):
    """The alert groups a bulk triage changes: those ``GET /alert-groups`` lists with these."""

    model_config = ConfigDict(extra="forbid")

    status: Status | None = None
    machine: FilterText | None = None
    channel: FilterText | None = None
    project: FilterText | None = None


class BulkTriage(BaseModel):
    """Triage many findings at once: ``ids`` by hand, or one filter; ``update`` for each."""

    model_config = ConfigDict(extra="forbid")

    ids: BulkIds | None = None
    regressions: RegressionSelection | None = Field(
        default=None, description="every regression this filter matches (500 at most)"
    )
    groups: GroupSelection | None = Field(
        default=None, description="every alert group this filter matches (500 at most)"
    )
    update: TriageUpdate


class BulkTriaged(BaseModel):
    """What a bulk triage changed: the ids per kind, and how many in all."""

    changed: dict[str, list[int]]
    count: int


class ManualFinding(BaseModel):
    """A step a person saw that detection missed: a finding, and a label."""

    model_config = ConfigDict(extra="forbid")

    series_id: RowId
    first_bad_run_id: RowId = Field(description="the first run of the new level")
    note: Annotated[str, NulFree] = Field(default="", max_length=10_000)


class StepPosition(BaseModel):
    """Where a step starts: the first run of its new level."""

    model_config = ConfigDict(extra="forbid")

    first_bad_run_id: RowId = Field(
        description="a run of the step's series at most 5 points from where it starts now"
    )


class PinnedThresholds(BaseModel):
    """Change-point thresholds a person pins on a series: they replace configured and learnt."""

    model_config = ConfigDict(extra="forbid")

    min_segment: StrictInt | None = Field(default=None, ge=2, le=100)
    max_p_value: StrictFloat | None = Field(default=None, gt=0, le=1)
    min_rel_change: StrictFloat | None = Field(default=None, ge=0, le=10)
    window: StrictInt | None = Field(default=None, ge=5, le=1000)
    noise_multiple: StrictFloat | None = Field(default=None, gt=0, le=100)
    min_rel_floor: StrictFloat | None = Field(default=None, ge=0, le=10)
    small_noise_multiple: StrictFloat | None = Field(default=None, gt=0, le=100)
    small_points: StrictInt | None = Field(default=None, ge=5, le=1000)


class SensitivityUpdate(BaseModel):
    """What a person sets of a series' sensitivity; absent fields stay as they are."""

    model_config = ConfigDict(extra="forbid")

    learning: StrictBool | None = Field(
        default=None, description="learn from triage (false: back to the configured thresholds)"
    )
    pinned: PinnedThresholds | None = Field(
        default=None, description="thresholds that replace the configured and learnt ones"
    )
    unpin: StrictBool = Field(default=False, description="drop the pinned thresholds")


class TriageRecord(BaseModel):
    """A series' last labels: how many, how many marked invalid, how many missed steps."""

    labels: int
    invalid: int
    missed: int
    invalid_share: float
    words: str = Field(description="`7 of the last 9 findings on this series were invalid`")


class SensitivityRead(BaseModel):
    """How sensitive detection is on a series, and the evidence for it."""

    series_id: int
    record: TriageRecord
    factor: float = Field(description="the learnt multiple of the minimum effect (1: none)")
    learning: bool
    pinned: dict[str, int | float] | None
    reason: str
    updated_by: str
    updated_at: datetime | None
    thresholds: dict[str, int | float] = Field(
        description="the change-point thresholds detection uses on the series now"
    )


class LabelShare(BaseModel):
    """The labels of findings of one series, suite, config or detector."""

    key: str
    labels: int
    invalid: int
    missed: int
    invalid_share: float


Name = Annotated[str, NulFree, Field(min_length=1, max_length=256)]


class SeriesSelection(BaseModel):
    """Which series a backtest replays; each field optional, an exact name."""

    model_config = ConfigDict(extra="forbid")

    machine: Name | None = None
    channel: Name | None = None
    project: Name | None = None
    suite: Name | None = None
    model: Name | None = None
    category: Name | None = None
    mode: Name | None = None
    precision: Name | None = None
    config: Name | None = None
    metric: Name | None = None


class BacktestRequest(BaseModel):
    """Thresholds to try, shaped like BENCHWATCH_DETECTOR_THRESHOLDS, over some series."""

    model_config = ConfigDict(extra="forbid")

    thresholds: dict[Name, dict[Name, StrictFloat]] = Field(
        default_factory=dict,
        max_length=100,
        description='e.g. {"suite:torchbench": {"min_rel_change": 0.05}}; over the configured',
    )
    select: SeriesSelection = Field(default_factory=SeriesSelection)
    subscription_id: RowId | None = Field(
        default=None, description="also replay this subscription's rules over stored findings"
    )


class BacktestSide(BaseModel):
    """One side of a backtest: findings and their triage labels."""

    findings: int
    real: int
    invalid: int
    missed: int
    precision: float | None = Field(description="real over real and invalid labels")


class BacktestItem(BaseModel):
    """A finding the proposal adds or removes."""

    change: Literal["added", "removed"]
    series_id: int
    case: str
    metric: str
    machine: str
    first_bad_run_id: int
    regression_id: int | None
    label: str


class SubscriptionReplay(BacktestSide):
    """A subscription's rules over stored steps: what it would have been told of."""

    untriaged: int


class BacktestReport(BaseModel):
    """What the thresholds would have found against what was found, and how it was triaged."""

    series: int
    points: int
    now: BacktestSide
    proposed: BacktestSide
    kept: int
    added: int
    removed: int
    items: list[BacktestItem]
    truncated: bool = Field(description="more series or findings than one backtest takes")
    subscription: SubscriptionReplay | None = None


class AlertGroupRead(TriageRead):
    """Regressions and failures of one cause window, with what they span."""

    id: int
    machine: str
    channel: str
    project: str = Field(default="default", description="the project of its first bad run")
    first_bad_run_id: int
    last_good_run_id: int
    status: str
    triage_due_at: datetime | None = Field(
        default=None, description="BENCHWATCH_TRIAGE_DAYS working days after it was found"
    )
    bug_due_at: datetime | None = Field(
        default=None, description="BENCHWATCH_BUG_DAYS working days after: a bug link by then"
    )
    overdue: Literal["", "triage", "bug"] = Field(
        default="", description="past which deadline: still new, or acknowledged without a bug"
    )
    counts: dict[str, int]  # regressions per direction, "failure", "coverage", "aggregate", ...
    suites: list[str]
    configs: list[str]
    precisions: list[str]
    metrics: list[str]
    environment_diff: dict[str, Any]


class MachineSilenceRead(BaseModel):
    """A machine and channel that stopped reporting; ended by its next run."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    group_id: int
    channel: str
    last_run_id: int
    expected_every_s: float = Field(description="How often it ran: the median interval")
    silent_since: datetime = Field(description="When its last run started")
    ended_by_run_id: int | None
    status: str
    created_at: datetime


class AlertGroupDetail(AlertGroupRead):
    """A group with its regressions, failures, aggregates and (alone) a silence."""

    regressions: list[RegressionRead]
    failures: list[CaseFailureRead]
    silences: list[MachineSilenceRead]
    aggregates: list[AggregateFindingRead]


class RunAnomalyRead(BaseModel):
    """The IsolationForest's view of a run (a secondary signal, not an alert)."""

    model_config = ConfigDict(from_attributes=True)

    run_id: int
    score: float
    anomalous: bool
    features: dict[str, float]
    history_runs: int


class RevisionRead(BaseModel):
    """What one revision moved: its groups, their counts and worst steps."""

    revision: str
    matched: dict[str, int] = Field(
        description="groups per way their first bad run carries it: commit, torch, torch_sha"
    )
    counts: dict[str, dict[str, int]] = Field(
        description="steps that hurt and failing cases per device, suite, config, precision"
    )
    failures: int = Field(description="failing cases in the groups")
    truncated: bool = Field(description="more than 500 groups: the newest are listed")
    groups: list[AlertGroupRead]
    worst: list[RegressionRead] = Field(description="the 20 largest steps that hurt")
