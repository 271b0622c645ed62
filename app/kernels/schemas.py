"""What the kernel reads answer."""

from pydantic import BaseModel, ConfigDict, Field

from app.benchmarks.schemas import BenchmarkRead
from app.kernels.code import KernelCodeChange
from app.kernels.diff import KernelDiff


class KernelRead(BaseModel):
    """The kernels of one identity in a case's profile; figures per profiled call."""

    kind: str  # fused, template, aten or kernel (docs/kernels.md)
    name: str
    calls: float
    time_us: float
    instances: int  # kernels of the profile merged under this identity
    graphs: list[str]
    names: list[str]  # as the profiler named them (the first few)
    mean_us: float | None = Field(default=None, description="time of one call of it")
    share: float | None = Field(default=None, description="its part of the case's call")


class KernelProfileRead(BaseModel):
    """A case's kernel profile in a run."""

    model_config = ConfigDict(from_attributes=True)

    benchmark: BenchmarkRead
    timing: str
    calls: int
    wall_us: float
    kernel_us: float
    other_us: float
    graphs: int | None
    recompiles: int | None
    kernels: list[KernelRead]


class KernelDiffRead(BaseModel):
    """One case's kernels from a base run to a head run."""

    base_run_id: int
    head_run_id: int
    benchmark: BenchmarkRead
    diff: KernelDiff


class CodeDiffRead(BaseModel):
    """One case's generated code from a base run to a head run, kernel by kernel."""

    base_run_id: int
    head_run_id: int
    benchmark: BenchmarkRead
    kernels: list[KernelCodeChange]


class ProbeKernelDiffRead(BaseModel):
    """A localization probe's kernels against its last good reference's."""

    localization_id: int
    base_position: int  # the last good reference probe
    position: int
    diff: KernelDiff
