"""Suite runs as the API shows them: progress, and each shard with its attempts and reason."""

from collections import Counter
from datetime import datetime
from typing import Annotated, Any, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from app.benchmarks import vocabulary as vocab
from app.core.bounds import RowId
from app.core.names import ProjectName
from app.runs.schemas import Strict
from app.suite_runs.models import SHARD_STATES, SuiteRun
from app.suite_runs.rows import public_reason

Name = Annotated[str, Field(min_length=1, max_length=128, pattern=vocab.NAME_PATTERN.pattern)]


CaseText = Annotated[str, Field(min_length=1, max_length=128)]


class CaseIdentity(Strict):
    """A case, as a result row names it: what a compare re-run measures again."""

    suite: CaseText
    model: CaseText
    category: Annotated[str, Field(max_length=64)] | None = None
    mode: CaseText
    precision: CaseText
    config: CaseText
    batch_size: Annotated[int, Field(ge=0, le=2**31 - 1)] | None = None


class CompareRerun(Strict):
    """What ``POST /api/v1/compare-reruns`` measures again: cases of a run, on its machine."""

    run_id: RowId = Field(description="a run a benchwatch worker measured")
    cases: Annotated[list[CaseIdentity], Field(min_length=1, max_length=20)]


class SuiteRunTrigger(Strict):
    """What ``POST /api/v1/suite-runs`` starts: a tier (or a command suite) on a machine."""

    machine: Name = Field(
        description="the machine's name: the queue of its worker, or of its pool's nodes"
    )
    tier: (
        Annotated[str, Field(max_length=32, json_schema_extra={"enum": list(vocab.SUITE_TIERS)})]
        | None
    ) = Field(
        default=None, description=f"a tier ({', '.join(vocab.SUITE_TIERS)}); or give `command`"
    )
    command: Name | None = Field(
        default=None, description="a command suite of BENCHWATCH_COMMAND_SUITES; or give `tier`"
    )
    commit: Annotated[
        str, Field(min_length=1, max_length=64, pattern=vocab.NAME_PATTERN.pattern)
    ] = Field(description="the commit measured (recorded on the run)")
    channel: Annotated[
        str, Field(min_length=1, max_length=64, pattern=vocab.NAME_PATTERN.pattern)
    ] = "nightly"
    trigger: vocab.Trigger = Field(default="ci", description="ci, schedule or manual")
    models: Annotated[list[Name], Field(min_length=1, max_length=64)] | None = Field(
        default=None, description="only these models' cases (as `benchwatch run-suite --models`)"
    )
    key: Name | None = Field(
        default=None, description="idempotency key: a retry with it answers the same suite run"
    )
    project: ProjectName | None = Field(
        default=None,
        description="the project the run is stored under; default: the token's project, "
        "else `default` (a project-limited token may name only its own)",
    )

    @field_validator("tier")
    @classmethod
    def _known_tier(cls, tier: str | None) -> str | None:
        if tier is not None and tier not in vocab.SUITE_TIERS:
            raise ValueError(f"unknown tier {tier!r}; known: {', '.join(vocab.SUITE_TIERS)}")
        return tier

    @model_validator(mode="after")
    def _one_suite(self) -> Self:
        if (self.tier is None) == (self.command is None):
            raise ValueError("give exactly one of tier and command")
        return self


class Progress(BaseModel):
    """A suite run's shards counted by state, and the share that is over (done or failed)."""

    pending: int
    running: int
    done: int
    failed: int
    percent: float = Field(description="done and failed shards of all, 0 to 100")


class ShardRead(BaseModel):
    """One shard of a suite run."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    position: int
    label: str
    status: str = Field(description="pending | running | done | failed")
    attempts: int
    worker: str = Field(description="the node that ran the latest attempt")
    lease_until: datetime | None = Field(description="a running shard's lease ends then")
    reason: str = Field(description="why the latest attempt failed")
    finished_at: datetime | None


def reason_for(reason: str, output: bool) -> str:
    """A reason as a reader sees it: in full with ``output``, else without the process's output."""
    return reason if output else public_reason(reason)


def shard_read(shard: Any, output: bool = False) -> "ShardRead":
    """A shard as a reader sees it (``reason_for``)."""
    read = ShardRead.model_validate(shard)
    read.reason = reason_for(read.reason, output)
    return read


class SuiteRunRead(BaseModel):
    """A suite run and how far it got."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    key: str
    machine: str
    tier: str
    trigger: str
    status: str = Field(description="queued | running | finished | failed | expired")
    reason: str = Field(description="why it failed (a run that could not be ingested)")
    started_at: datetime
    finished_at: datetime | None
    run_id: int | None = Field(description="the run it stored, once finished")
    shards_total: int
    shards_by_status: dict[str, int]
    progress: Progress
    commit: str = Field(description="the commit it measures, as its trigger named it")

    @classmethod
    def of(cls, suite_run: SuiteRun, output: bool = False) -> Self:
        """The suite run's fields and its shards counted by status.

        ``output``: the reason keeps the failed process's output tail (a caller with a token
        or sign-in only: it may quote secrets); else it ends where the tail began.
        """
        derived = {"shards_total", "shards_by_status", "progress", "commit"}
        fields = {name: getattr(suite_run, name) for name in cls.model_fields.keys() - derived}
        fields["reason"] = reason_for(suite_run.reason or "", output)
        counts = Counter(shard.status for shard in suite_run.shards)
        total = len(suite_run.shards)
        over = counts["done"] + counts["failed"]
        progress = Progress(
            **{state: counts[state] for state in SHARD_STATES},
            percent=round(100 * over / total, 1) if total else 0.0,
        )
        commit = str(suite_run.description.get("commit", ""))
        return cls(
            **fields,
            shards_total=total,
            shards_by_status=counts,
            progress=progress,
            commit=commit,
        )


class SuiteRunDetail(SuiteRunRead):
    """A suite run with its shards."""

    shards: list[ShardRead]
