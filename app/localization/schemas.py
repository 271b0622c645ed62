"""What a request for a localization holds, validated; and how a localization is read."""

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.core.bounds import RowId

# What each kind of request names (besides ``kind``).
ASKED_WITH = {
    "regression": ("id",),
    "failure": ("id",),
    "aggregate": ("id",),
    "configs": ("run_id", "slow_benchmark_id", "fast_benchmark_id"),
}


class LocalizationCreate(BaseModel):
    """What to localize: a finding by its id, or a case slower under one config on a run.

    A regression, a failure or an aggregate finding by ``id``; ``configs``: one case slower
    under one config than under another on one run, by the run and the two benchmarks.
    """

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"kind": "regression", "id": 12},
                {"kind": "configs", "run_id": 41, "slow_benchmark_id": 7, "fast_benchmark_id": 8},
            ]
        },
    )

    kind: Literal["regression", "failure", "aggregate", "configs"] = Field(
        description="The finding's kind: an aggregate finding is localized through the "
        "regression that explains most of it; configs: the compiler settings that make one "
        "case slower under one config than under another, on one run."
    )
    id: RowId | None = Field(
        default=None, description="The finding's id (regression, failure, aggregate)."
    )
    run_id: RowId | None = Field(
        default=None, description="configs: the run both were measured in."
    )
    slow_benchmark_id: RowId | None = Field(
        default=None, description="configs: the case's benchmark under the slower config."
    )
    fast_benchmark_id: RowId | None = Field(
        default=None,
        description="configs: the same case's benchmark under the config it is compared with.",
    )

    def problems(self) -> list[dict[str, Any]]:
        """The fields this kind needs and lacks, and those it does not take, each located."""
        needed = ASKED_WITH[self.kind]
        found = []
        for name in ("id", "run_id", "slow_benchmark_id", "fast_benchmark_id"):
            given = getattr(self, name) is not None
            if given != (name in needed):
                what = "required" if not given else "not taken"
                message = f"{what} for kind {self.kind} (it takes {', '.join(needed)})"
                found.append({"loc": name, "field": name, "message": message})
        return found


class ProbeRead(BaseModel):
    """One environment measured: its spec, samples and decision (evidence, not history)."""

    model_config = ConfigDict(from_attributes=True)

    position: int
    strategy: str
    label: str
    spec: dict[str, Any]
    outcome: str = Field(
        description="good, bad, halfway, unknown, build_failed, or reference (the pre-flight's "
        "last good and first bad environments)"
    )
    samples: list[float]
    p_good: float | None = Field(description="Rank test p-value against the good reference.")
    p_bad: float | None
    step_position: float | None = Field(
        description="The probe's median on the line from the good median (0) to the bad (1)."
    )
    effect: float | None = Field(description="The probe's median change against good's.")
    rounds: int = Field(description="Measurements of this environment (1: no repeat).")
    reason: str
    measured_at: datetime
    kernel_profile: dict[str, Any] | None = Field(
        default=None,
        description="The case's kernels in this environment, as a run's profile is read "
        "(docs/kernels.md); null where the probe's command gave none.",
    )


class LocalizationRead(BaseModel):
    """A localization: what it measures, where it stands, what it found and what it cost."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    finding_kind: str
    finding_id: int
    regression_id: int | None
    case_failure_id: int | None
    aggregate_finding_id: int | None
    group_id: int | None
    suite_run_id: int | None
    machine: str
    project: str
    good_run_id: int | None
    bad_run_id: int | None
    case: dict[str, Any]
    good_environment: dict[str, Any]
    bad_environment: dict[str, Any]
    state: str = Field(
        description="queued, running, culprit_found, not_reproduced, inconclusive or failed"
    )
    started_by: str
    worker: str = Field(description="The worker node that runs (or ran) it; empty while queued.")
    reason: str
    answer: dict[str, Any] = Field(
        description="The environment diff; when finished: the strategy, the culprit (kind, "
        "names, versions; a commit's title, author and link; settings and values), the "
        "pre-flight's figures, the commits still suspected of an inconclusive bisection."
    )
    probe_count: int
    repeats: int
    builds: int
    samples: int
    requested_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class LocalizationDetail(LocalizationRead):
    """A localization with every probe it measured."""

    probes: list[ProbeRead]
