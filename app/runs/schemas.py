"""The native run payload (docs/design.md §3, a public contract) and the run read models."""

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)
from typing_extensions import TypedDict

from app.benchmarks import vocabulary as vocab
from app.benchmarks.schemas import MachineRead
from app.core.bounds import ISO_TEXT, MAX_JSON_DEPTH, Int32, RunTime
from app.core.names import DEFAULT_PROJECT, ProjectName
from app.core.urls import HttpUrlText

Finite = Annotated[float, Field(allow_inf_nan=False)]
Name = Annotated[str, Field(min_length=1, max_length=128)]


# ISO 8601 strings from JSON (a datetime from Python), from 1970 to 2999 (RunTime): the
# pattern says the years in the schema.
Timestamp = Annotated[
    RunTime,
    Field(strict=False, json_schema_extra={"pattern": "^(19[7-9][0-9]|2[0-9]{3})-"}),
    ISO_TEXT,
]
MAX_SAMPLES = 100_000
_PRECISIONS = frozenset(vocab.PRECISIONS)


def _finite_json(value: Any, path: str = "", depth: int = 1) -> None:
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        raise ValueError(f"NaN and Infinity are not JSON numbers (at {path or 'top level'})")
    if isinstance(value, dict | list) and depth > MAX_JSON_DEPTH:
        raise ValueError(f"nested deeper than {MAX_JSON_DEPTH} levels (at {path})")
    if isinstance(value, dict):
        for key, item in value.items():
            _finite_json(item, f"{path}.{key}" if path else str(key), depth + 1)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _finite_json(item, f"{path}[{index}]", depth + 1)


def _check_finite(value: dict[str, Any]) -> dict[str, Any]:
    _finite_json(value)
    return value


# Free-form JSON objects (extra, params, options): anything JSON, but NaN/Infinity and nesting
# past MAX_JSON_DEPTH.
JSONObject = Annotated[dict[str, Any], AfterValidator(_check_finite)]

EXAMPLE_RUN: dict[str, Any] = {
    "key": "gha-123456-1",
    "machine": {
        "name": "mi300x-8",
        "device": "rocm",
        "arch": "AMD Instinct MI300X",
        "gpu_count": 8,
        "hostname": "node17",
    },
    "environment": {
        "channel": "nightly",
        "torch": "2.6.0.dev20241101+rocm6.2",
        "packages": {"triton": "3.1.0", "numpy": "2.1.2"},
    },
    "trigger": "schedule",
    "tier": "daily",
    "commit": "3f2c9e1",
    "branch": "main",
    "url": "https://ci.example/run/123456",
    "started_at": "2026-11-29T00:00:00Z",
    "finished_at": "2026-11-29T03:10:00Z",
    "results": [
        {
            "suite": "torchbench",
            "model": "resnet50",
            "mode": "inference",
            "precision": "bf16",
            "config": "cudagraphs",
            "batch_size": 32,
            "metric": "latency",
            "unit": "ms",
            "higher_is_better": False,
            "value": 4.21,
            "samples": [4.20, 4.21, 4.25],
        },
        {
            "suite": "torchbench",
            "model": "resnet50",
            "mode": "inference",
            "precision": "bf16",
            "config": "cudagraphs",
            "batch_size": 32,
            "metric": "accuracy",
            "status": "ok",
            "text_value": "pass",
        },
        {
            "suite": "torchbench",
            "model": "hf_T5",
            "mode": "inference",
            "precision": "bf16",
            "config": "cudagraphs",
            "batch_size": 8,
            "metric": "latency",
            "unit": "ms",
            "higher_is_better": False,
            "status": "failed",
            "reason": "OOM",
        },
    ],
}


class Strict(BaseModel):
    """Input models: no unknown fields, no silent type coercion."""

    model_config = ConfigDict(extra="forbid", strict=True, str_strip_whitespace=True)


class MachineIn(Strict):
    """The hardware a run ran on; ``name`` identifies it across runs."""

    name: Annotated[str, Field(min_length=1, max_length=128, pattern=vocab.NAME_PATTERN.pattern)]
    device: vocab.Device
    arch: Annotated[str, Field(max_length=256)] = ""
    gpu_count: Int32 | None = None
    gpu_memory_gb: Annotated[Finite, Field(ge=0)] | None = None
    cpu: Annotated[str, Field(max_length=256)] = ""
    cpu_count: Int32 | None = None
    host_memory_gb: Annotated[Finite, Field(ge=0)] | None = None
    driver: Annotated[str, Field(max_length=128)] = ""
    hostname: Annotated[str, Field(max_length=256)] = ""
    extra: JSONObject = Field(default_factory=dict)


PACKAGE_NAME_LENGTH = 128
PACKAGE_VERSION_LENGTH = 256
COLUMN_LENGTH = 128  # of the environment's torch and triton columns


def _bounded_names(value: Any) -> Any:
    # Before the items are validated: the error names the place, never the (long) name itself.
    if isinstance(value, dict):
        for name in value:
            if isinstance(name, str) and not 1 <= len(name) <= PACKAGE_NAME_LENGTH:
                raise ValueError(
                    f"a package name of {len(name)} characters "
                    f"(from {name[:40]!r}); 1 to {PACKAGE_NAME_LENGTH}"
                )
    return value


class PackageVersions(  # type: ignore[call-arg]
    TypedDict, total=False, extra_items=Annotated[str, Field(max_length=PACKAGE_VERSION_LENGTH)]
):
    """Package name -> version, each bounded.

    ``torch`` and ``triton`` fill the environment's own fields of that name when those are not
    given, so their versions fit those columns.
    """

    __pydantic_config__ = ConfigDict(  # type: ignore[misc]
        extra="allow",
        strict=True,
        str_strip_whitespace=True,
        json_schema_extra={
            "propertyNames": {"minLength": 1, "maxLength": PACKAGE_NAME_LENGTH},
        },
    )

    torch: Annotated[str, Field(max_length=COLUMN_LENGTH)]
    triton: Annotated[str, Field(max_length=COLUMN_LENGTH)]


if TYPE_CHECKING:  # to callers a plain mapping (mypy reads no PEP 728 extra_items yet)
    Packages = dict[str, str]
else:
    Packages = Annotated[PackageVersions, BeforeValidator(_bounded_names)]


class EnvironmentIn(Strict):
    """The software stack of a run; ``channel`` is its release line (N-1, N, N+1, ...)."""

    channel: Annotated[
        str, Field(min_length=1, max_length=64, pattern=vocab.NAME_PATTERN.pattern)
    ] = "nightly"
    torch: Annotated[str, Field(max_length=128)] = ""
    torch_git_sha: Annotated[str, Field(max_length=64)] = ""
    triton: Annotated[str, Field(max_length=128)] = ""
    python: Annotated[str, Field(max_length=64)] = ""
    cuda: Annotated[str, Field(max_length=64)] = ""
    hip: Annotated[str, Field(max_length=64)] = ""
    driver: Annotated[str, Field(max_length=128)] = ""
    packages: Packages = Field(default_factory=dict)
    compiler_options: JSONObject = Field(default_factory=dict)
    extra: JSONObject = Field(default_factory=dict)


class CaseFields(Strict):
    """The case a row names: a model in a suite, run one way (``cases_of`` keys on it)."""

    suite: Name
    model: Annotated[str, Field(min_length=1, max_length=256)]
    category: Annotated[str, Field(max_length=64)] = ""
    mode: vocab.Mode = "inference"
    precision: Annotated[str, Field(min_length=1, max_length=16)] = "fp32"
    config: Name = "eager"
    config_options: JSONObject | None = None
    batch_size: Int32 | None = None
    params: JSONObject = Field(default_factory=dict)

    @field_validator("precision")
    @classmethod
    def _known_precision(cls, value: str) -> str:
        if value in _PRECISIONS:  # the usual case, and cheaper than folding case and aliases
            return value
        if (canonical := vocab.canonical_precision(value)) is None:
            raise ValueError(f"unknown precision {value!r}; one of {', '.join(vocab.PRECISIONS)}")
        return canonical

    @field_validator("config")
    @classmethod
    def _canonical_config(cls, value: str) -> str:
        if value in vocab.COMPILER_CONFIGS:  # canonical already, and a valid name
            return value
        if not vocab.NAME_PATTERN.match(value):
            raise ValueError("config must be letters, digits and _ . : + -")
        return vocab.canonical_config(value)


class ResultIn(CaseFields):
    """One metric of one benchmark case in a run."""

    metric: Name
    unit: Annotated[str, Field(max_length=32)] | None = None
    higher_is_better: bool | None = None
    kind: vocab.MetricKind | None = None
    value: Finite | None = None
    # minItems in the schema; the validator's own message says what to do instead
    samples: (
        Annotated[list[Finite], Field(max_length=MAX_SAMPLES, json_schema_extra={"minItems": 1})]
        | None
    ) = None
    status: vocab.Status = "ok"
    reason: Annotated[str, Field(max_length=4000)] = ""
    text_value: Annotated[str, Field(min_length=1, max_length=256)] | None = None
    extra: JSONObject | None = None

    @field_validator("metric")
    @classmethod
    def _canonical_metric(cls, value: str) -> str:
        return vocab.canonical_metric(value)

    @field_validator("unit")
    @classmethod
    def _known_unit(cls, value: str | None) -> str | None:
        if value is not None and value not in vocab.UNITS:
            known = ", ".join(repr(u) for u in vocab.UNITS)
            raise ValueError(f"unknown unit {value!r}; known units: {known}")
        return value

    @field_validator("samples")
    @classmethod
    def _non_empty(cls, value: list[float] | None) -> list[float] | None:
        if value is not None and not value:
            raise ValueError("samples must not be empty (leave the field out instead)")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.status == "ok" and self.value is None and not self.samples and not self.text_value:
            raise ValueError("a result with status 'ok' needs a value, samples or a text_value")
        if self.status != "ok" and not self.reason:
            raise ValueError(f"a result with status {self.status!r} needs a reason")
        spec = vocab.WELL_KNOWN_METRICS.get(self.metric)
        unit = self.unit if self.unit is not None else (spec.unit if spec else "")
        if unit not in vocab.UNITS:
            raise ValueError(f"unknown unit {unit!r}")
        lowest = min(self.samples) if self.samples else None
        if self.value is not None:
            lowest = self.value if lowest is None else min(lowest, self.value)
        if lowest is None:
            return self
        if lowest < 0 and not vocab.allows_negative(unit):
            raise ValueError(f"values in {unit!r} cannot be negative")
        if self.higher_is_better is None and spec is None and vocab.default_direction(unit) is None:
            raise ValueError(
                f"higher_is_better is required: {self.metric!r} is not a well-known metric "
                f"and its unit {unit!r} does not say which way is better"
            )
        return self

    @property
    def spec(self) -> vocab.MetricSpec | None:
        """Defaults when the metric is well known."""
        return vocab.WELL_KNOWN_METRICS.get(self.metric)

    @property
    def resolved_unit(self) -> str:
        """The unit given, else the well-known metric's, else dimensionless."""
        if self.unit is not None:
            return self.unit
        return self.spec.unit if self.spec else ""

    @property
    def resolved_direction(self) -> bool | None:
        """Whether higher is better: given, else the well-known metric's, else the unit's."""
        if self.higher_is_better is not None:
            return self.higher_is_better
        if self.spec is not None:
            return self.spec.higher_is_better
        return vocab.default_direction(self.resolved_unit)

    @property
    def resolved_kind(self) -> str:
        """The metric kind given, else the well-known metric's, else ``performance``."""
        if self.kind is not None:
            return self.kind
        return self.spec.kind if self.spec else "performance"


MAX_PROFILE_KERNELS = 200
MAX_KERNEL_PROFILES = 5000
PerCall = Annotated[Finite, Field(ge=0)]


class KernelIn(Strict):
    """One kernel of a case's profile; figures per profiled call."""

    name: Annotated[str, Field(min_length=1, max_length=4000)]
    calls: PerCall
    time_us: PerCall = Field(description="device time (timing device) or self CPU time")
    graph: Annotated[str, Field(max_length=64)] = Field(
        default="", description="the compiled graph that ran it (dynamo's frame/compile id)"
    )


class KernelSourceIn(Strict):
    """One kernel Inductor generated: its name, its source and its launch heuristics."""

    name: Annotated[str, Field(min_length=1, max_length=1000)]
    source: Annotated[str, Field(max_length=64_000)]
    launch: Annotated[str, Field(max_length=4_000)] = ""


class GeneratedCodeIn(Strict):
    """What Inductor generated for the case: each graph's output code and its kernels."""

    graphs: Annotated[list[Annotated[str, Field(max_length=512_000)]], Field(max_length=16)] = (
        Field(default_factory=list)
    )
    kernels: Annotated[list[KernelSourceIn], Field(max_length=400)] = Field(default_factory=list)


class KernelProfileIn(CaseFields):
    """The kernels a profiler saw in one case's calls: kept beside the run, never a series.

    The case is one the run's results name. Kernels are named as the profiler names them;
    benchwatch matches them across builds by a normalised identity (docs/kernels.md).
    """

    timing: Literal["device", "cpu_self"] = Field(
        description="what a kernel's time is: device kernel time, or self CPU time (no GPU)"
    )
    calls: Annotated[int, Field(ge=1, le=1_000_000)] = Field(
        description="profiled calls the figures average over"
    )
    wall_us: PerCall = Field(description="one call, start to finish (device work included)")
    kernels: Annotated[list[KernelIn], Field(max_length=MAX_PROFILE_KERNELS)]
    other_us: PerCall = Field(default=0.0, description="the kernels past the list, summed")
    graphs: Annotated[int, Field(ge=0, le=1_000_000)] | None = None
    recompiles: Annotated[int, Field(ge=0, le=1_000_000)] | None = None
    code: GeneratedCodeIn | None = Field(
        default=None, description="what Inductor generated for the case (compiled configs)"
    )


class ShardIn(Strict):
    """One CI job's part of a run: the jobs of one workflow post under the workflow's key."""

    name: Annotated[
        str,
        Field(
            min_length=1,
            max_length=128,
            pattern=vocab.NAME_PATTERN.pattern,
            description="the job (shard) within the workflow: a retry of it sends the same; "
            "the run is the workflow's (its key) on the shard's machine and channel",
        ),
    ]
    expected: Annotated[int, Field(ge=1, le=1000)] | None = Field(
        default=None,
        description="how many shards the run has: it is complete (and detected) when they "
        "are in; without it, once no shard came for BENCHWATCH_RUN_SHARDS_QUIET_S",
    )


class RunIn(Strict):
    """One run with all its results: the body of ``POST /api/v1/runs``."""

    model_config = ConfigDict(json_schema_extra={"examples": [EXAMPLE_RUN]})

    key: Annotated[str, Field(min_length=1, max_length=256)]
    project: ProjectName = DEFAULT_PROJECT
    machine: MachineIn
    environment: EnvironmentIn = Field(default_factory=EnvironmentIn)
    trigger: vocab.Trigger = "manual"
    tier: Annotated[str, Field(max_length=32)] = ""
    commit: Annotated[str, Field(max_length=64)] = ""
    branch: Annotated[str, Field(max_length=256)] = ""
    base_commit: Annotated[str, Field(max_length=64)] = Field(
        default="",
        description="a branch's fork point from the default branch (git merge-base): its "
        "verdicts compare with the default branch there",
    )
    default_branch: Annotated[str, Field(max_length=256)] = Field(
        default="",
        description="the repository's default branch, as the CI says it (benchwatch upload "
        "sends it): a run of another branch is stored apart from the history; without it, "
        "BENCHWATCH_DEFAULT_BRANCHES guesses",
    )
    shard: ShardIn | None = None
    url: HttpUrlText = ""
    started_at: Timestamp | None = None
    finished_at: Timestamp | None = None
    extra: JSONObject = Field(default_factory=dict)
    results: Annotated[list[ResultIn], Field(min_length=1)]
    kernel_profiles: Annotated[list[KernelProfileIn], Field(max_length=MAX_KERNEL_PROFILES)] = (
        Field(
            default_factory=list,
            description="kernel profiles of the results' cases, one per case (docs/kernels.md)",
        )
    )

    @model_validator(mode="after")
    def _ordered_times(self) -> Self:
        if self.started_at and self.started_at.tzinfo is None:
            raise ValueError("started_at needs a timezone (e.g. a trailing Z)")
        if self.finished_at and self.finished_at.tzinfo is None:
            raise ValueError("finished_at needs a timezone (e.g. a trailing Z)")
        if self.started_at and self.finished_at and self.finished_at < self.started_at:
            raise ValueError("finished_at is before started_at")
        return self


class EnvironmentRead(BaseModel):
    """A stored environment."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    channel: str
    torch: str
    torch_git_sha: str
    triton: str
    python: str
    cuda: str
    hip: str
    driver: str
    packages: dict[str, str]
    compiler_options: dict[str, Any]
    extra: dict[str, Any]


class Coverage(BaseModel):
    """How many cases (benchmarks) a run attempted, and how they ended."""

    attempted: int
    passed: int
    failed: int
    skipped: int


class RunRead(BaseModel):
    """A stored run, without its results."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    key: str
    machine: MachineRead
    environment: EnvironmentRead
    channel: str
    project: str = DEFAULT_PROJECT
    trigger: str
    tier: str
    commit: str
    branch: str
    base_commit: str = ""
    branch_reason: str = Field(
        default="",
        description="why the run is stored as a branch, under its own channel (empty: it is "
        "the default branch's)",
    )
    url: str
    hostname: str
    status: str = Field(
        description="completed; partial while a sharded run waits for shards; invalid when an"
        " admin took it out of history (its results are then not listed)"
    )
    invalidated_at: datetime | None = None
    invalidated_by: str = ""
    invalidated_reason: str = ""
    expected_shards: int | None = None
    started_at: datetime
    finished_at: datetime | None
    created_at: datetime
    detected_at: datetime | None = None
    result_count: int
    coverage: Coverage
    extra: dict[str, Any]


class ResultRead(BaseModel):
    """One stored result with what identifies its series (in its run, the series is its key)."""

    series_id: int
    suite: str
    model: str
    category: str
    mode: str
    precision: str
    config: str
    batch_size: int | None
    params: dict[str, Any]
    metric: str
    unit: str
    higher_is_better: bool | None
    status: str
    value: float | None
    samples: list[float] | None = Field(description="null when asked with samples=false")
    samples_count: int | None = Field(default=None, description="null: no samples")
    samples_min: float | None = None
    samples_max: float | None = None
    text_value: str | None
    reason: str
    extra: dict[str, Any] | None


class RunDetail(RunRead):
    """A stored run with its results (all of them, or a page of a big run's)."""

    results: list[ResultRead]
    results_next_cursor: str | None = Field(
        default=None,
        description="More results follow: pass this back as `results_cursor` to get them",
    )


class RunPage(BaseModel):
    """One page of runs, newest first; pass ``next_cursor`` back as ``cursor``."""

    items: list[RunRead]
    next_cursor: str | None
