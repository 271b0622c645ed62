"""The TorchInductor dashboard's aggregates per suite x config x precision x mode.

Definitions follow PyTorch's HUD (``torchci/lib/benchmark/compilerUtils.ts``):

- a model *passes accuracy* when its accuracy status is ``pass``, ``pass_due_to_skip`` or
  ``eager_variation``; when a run has no accuracy result for a model, benchwatch counts it as
  passing when its speedup was measured (> 0);
- **pass rate** = models that pass accuracy with speedup != 0 (or ``pass_due_to_skip``)
  / all models;
- **geomean speedup** over passing models with speedup != 0, no clipping;
- **mean compile time**, **mean compression ratio**: arithmetic means over passing models
  with a non-zero value; **mean peak memory** (dynamo's) and **mean abs latency** likewise.
"""

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from app.benchmarks.comparison import geomean
from app.benchmarks.vocabulary import PASSING_ACCURACY

GroupKey = tuple[str, str, str, str]  # suite, config, precision, mode


@dataclass
class ModelRecord:
    """What one model of one group measured in one run (None: not reported)."""

    suite: str
    config: str
    precision: str
    mode: str
    model: str
    speedup: float | None = None  # a failed speedup result counts as 0
    accuracy: str | None = None
    compilation_latency: float | None = None
    compression_ratio: float | None = None
    dynamo_peak_mem: float | None = None
    abs_latency: float | None = None

    @property
    def group(self) -> GroupKey:
        """The suite x config x precision x mode this model belongs to."""
        return (self.suite, self.config, self.precision, self.mode)

    @property
    def passes_accuracy(self) -> bool:
        """Accuracy status passing (or, with no accuracy result, a measured speedup)."""
        if self.accuracy is not None:
            return self.accuracy in PASSING_ACCURACY
        return (self.speedup or 0.0) > 0.0

    @property
    def passes(self) -> bool:
        """Counted in the pass rate."""
        return (self.passes_accuracy and (self.speedup or 0.0) != 0.0) or (
            self.accuracy == "pass_due_to_skip"
        )


@dataclass(frozen=True)
class GroupStats:
    """The aggregates of one group in one run."""

    pass_count: int
    total_count: int
    pass_rate: float
    geomean_speedup: float | None
    mean_compile_time_s: float | None
    mean_compression_ratio: float | None
    mean_peak_memory_gb: float | None
    mean_abs_latency_ms: float | None


def _mean_nonzero(values: Iterable[float | None]) -> float | None:
    kept = [v for v in values if v is not None and v != 0.0]
    return sum(kept) / len(kept) if kept else None


def group_stats(records: list[ModelRecord]) -> GroupStats:
    """Aggregates of one group's model records."""
    passing = [r for r in records if r.passes_accuracy]
    passed = sum(r.passes for r in records)
    speedups = [r.speedup for r in passing if r.speedup is not None and r.speedup > 0.0]
    return GroupStats(
        pass_count=passed,
        total_count=len(records),
        pass_rate=passed / len(records) if records else 0.0,
        geomean_speedup=geomean(speedups),
        mean_compile_time_s=_mean_nonzero(r.compilation_latency for r in passing),
        mean_compression_ratio=_mean_nonzero(r.compression_ratio for r in passing),
        mean_peak_memory_gb=_mean_nonzero(r.dynamo_peak_mem for r in passing),
        mean_abs_latency_ms=_mean_nonzero(r.abs_latency for r in passing),
    )


def summarize(records: Iterable[ModelRecord]) -> dict[GroupKey, GroupStats]:
    """Aggregates per group."""
    groups: dict[GroupKey, list[ModelRecord]] = defaultdict(list)
    for record in records:
        groups[record.group].append(record)
    return {key: group_stats(members) for key, members in sorted(groups.items())}


def common_only(
    new: list[ModelRecord], base: list[ModelRecord]
) -> tuple[list[ModelRecord], list[ModelRecord]]:
    """Both runs' records restricted to the models present in both (per group)."""
    shared = {(r.group, r.model) for r in new} & {(r.group, r.model) for r in base}
    return (
        [r for r in new if (r.group, r.model) in shared],
        [r for r in base if (r.group, r.model) in shared],
    )
