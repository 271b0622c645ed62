"""Suite runs as the API shows them: progress, and each shard with its attempts and reason."""

from collections import Counter
from datetime import datetime
from typing import Self

from pydantic import BaseModel, ConfigDict, Field

from app.suite_runs.models import SuiteRun


class ShardRead(BaseModel):
    """One shard of a suite run."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    position: int
    label: str
    status: str = Field(description="pending | running | done | failed")
    attempts: int
    worker: str = Field(description="the worker of the latest attempt")
    lease_until: datetime | None = Field(description="a running shard's lease ends then")
    reason: str = Field(description="why the latest attempt failed")
    finished_at: datetime | None


class SuiteRunRead(BaseModel):
    """A suite run and how far it got."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    key: str
    machine: str
    tier: str
    trigger: str
    status: str = Field(description="running | finished | failed")
    reason: str = Field(description="why it failed (a run that could not be ingested)")
    started_at: datetime
    finished_at: datetime | None
    run_id: int | None = Field(description="the run it stored, once finished")
    shards_total: int
    shards_by_status: dict[str, int]

    @classmethod
    def of(cls, suite_run: SuiteRun) -> Self:
        """The suite run's fields and its shards counted by status."""
        derived = {"shards_total", "shards_by_status"}
        fields = {name: getattr(suite_run, name) for name in cls.model_fields.keys() - derived}
        counts = Counter(shard.status for shard in suite_run.shards)
        return cls(**fields, shards_total=len(suite_run.shards), shards_by_status=counts)


class SuiteRunDetail(SuiteRunRead):
    """A suite run with its shards."""

    shards: list[ShardRead]
