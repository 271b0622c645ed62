"""Read models of the catalog."""

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class MachineRead(BaseModel):
    """A machine as stored."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    name: str
    device: str
    arch: str
    arch_short: str
    gpu_count: int | None
    gpu_memory_gb: float | None
    cpu: str
    cpu_count: int | None
    host_memory_gb: float | None
    extra: dict[str, Any]


class BenchmarkRead(BaseModel):
    """A benchmark case as stored."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    suite: str
    model: str
    category: str
    mode: str
    precision: str
    config: str
    batch_size: int | None
    params: dict[str, Any]


class MetricRead(BaseModel):
    """A metric as stored."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    name: str
    unit: str
    higher_is_better: bool | None
    kind: str


class SeriesRead(BaseModel):
    """A series: what it measures, where and on which release line."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    benchmark: BenchmarkRead
    metric: MetricRead
    machine: str = Field(validation_alias="machine_name")
    channel: str
    project: str = "default"


class Point(BaseModel):
    """One value of a series, with the run it came from."""

    run_id: int
    measured_at: datetime
    status: str
    value: float | None
    text_value: str | None
    commit: str
    samples_min: float | None = None
    samples_max: float | None = None
    samples: list[float] | None = None


class SeriesPoints(BaseModel):
    """A series' points in a time range; ``downsampled`` says points were dropped."""

    series: SeriesRead
    total: int
    downsampled: bool
    points: list[Point]
