"""Read models of summaries and run-vs-run comparisons."""

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class RunRef(BaseModel):
    """Enough of a run to name it."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    key: str
    channel: str
    commit: str
    started_at: datetime


class Stats(BaseModel):
    """The dashboard aggregates of one group in one run."""

    model_config = ConfigDict(from_attributes=True)

    pass_count: int
    total_count: int
    pass_rate: float
    geomean_speedup: float | None
    mean_compile_time_s: float | None
    mean_compression_ratio: float | None
    mean_peak_memory_gb: float | None
    mean_abs_latency_ms: float | None


class GroupSummary(BaseModel):
    """One suite x config x precision x mode: the new run's aggregates and the base's."""

    suite: str
    config: str
    precision: str
    mode: str
    new: Stats | None
    base: Stats | None


class Summary(BaseModel):
    """Aggregates of a run (and optionally a base run) on one machine."""

    machine: str
    run: RunRef
    base_run: RunRef | None
    common_only: bool
    groups: list[GroupSummary]


class CaseConfidence(BaseModel):
    """How sure a case's change is, from its samples on both sides (``stats=true``)."""

    ratio: float = Field(description="median(new samples) / median(base samples)")
    interval: tuple[float, float] = Field(description="95% bootstrap interval of the ratio")
    p_value: float = Field(description="two-sided Mann-Whitney U test of the samples")
    cliffs_delta: float = Field(description="effect size: P(new > base) - P(new < base)")
    verdict: Literal["better", "worse", "same", "unsure", "changed"]
    needs_more: bool = Field(description="more samples could decide it: re-run the case")
    samples: tuple[int, int] = Field(description="samples read: base, new (re-runs included)")
    bimodal: list[Literal["base", "new"]] = Field(description="sides whose samples hold two modes")
    reason: str


class GeomeanRead(BaseModel):
    """The geomean of new / base over the cases both runs measured, with its interval."""

    ratio: float | None
    count: int
    interval: tuple[float, float] | None = Field(
        description="95% bootstrap interval, each case's samples redrawn (null: no samples)"
    )


class ComparisonRow(BaseModel):
    """One benchmark x metric in two runs."""

    suite: str
    model: str
    mode: str
    precision: str
    config: str
    batch_size: int | None
    params: dict[str, Any]
    metric: str
    unit: str
    higher_is_better: bool | None
    base_value: float | None
    new_value: float | None
    base_status: str | None
    new_status: str | None
    base_text: str | None
    new_text: str | None
    rel_change: float | None
    verdict: str  # better | worse | unchanged | new | missing | now_fails | now_passes | failing
    confidence: CaseConfidence | None = Field(
        default=None, description="with stats=true, where both runs measured the case"
    )


class Comparison(BaseModel):
    """Every benchmark x metric of two runs, side by side."""

    base_run: RunRef
    new_run: RunRef
    threshold: float
    total: int = Field(description="rows of the whole comparison")
    offset: int
    limit: int
    next_offset: int | None = Field(
        description="the next page's `offset` (a page ends early past its byte budget); null "
        "after the last"
    )
    rows: list[ComparisonRow] = Field(
        description="at most `limit` rows from `offset`, in case order"
    )
    geomean: GeomeanRead | None = Field(default=None, description="with stats=true")
