"""What ``GET /runs/{run_id}/verdicts`` answers."""

from typing import Any, Literal

from pydantic import BaseModel, Field

VerdictKind = Literal["pass", "regression", "improvement", "no_baseline", "error"]


class Baseline(BaseModel):
    """The default branch's run the results were judged against."""

    how: Literal["merge-base", "nearest-earlier", "none"] = Field(
        description="merge-base: the run of the run's base_commit; nearest-earlier: the "
        "newest default-branch run that started before it; none: there is none"
    )
    commit: str | None
    run_ids: list[int]


class VerdictItem(BaseModel):
    """One result and its verdict."""

    suite: str
    model: str
    config: str
    precision: str
    mode: str
    batch_size: int | None
    params: dict[str, Any]
    metric: str
    unit: str
    higher_is_better: bool | None
    new: float | None
    verdict: VerdictKind
    base: float | None = Field(description="the baseline's median")
    rel_change: float | None
    p_value: float | None = Field(description="the samples' rank test, where both have samples")
    z: float | None = Field(description="the change over the baseline's noise (robust)")
    threshold: float | None = Field(description="the least relative change that counts")
    reason: str
    series_id: int = Field(description="the run's result's series (the branch's)")
    default_branch_series_id: int | None = Field(
        description="the default branch's series it was judged against (None: there is none)"
    )
    series_url: str


class Verdicts(BaseModel):
    """A run's results against the default branch, worst first."""

    run_id: int
    branch: str
    commit: str
    channel: str
    default_branch_channel: str
    is_branch: bool = Field(description="a branch's run, kept apart from the default branch")
    baseline: Baseline
    counts: dict[VerdictKind, int]
    items: list[VerdictItem]
    url: str
