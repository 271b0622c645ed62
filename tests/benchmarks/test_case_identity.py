"""A case's identity has one home (issue 27 point 5): what a worker writes for a case it
measures and what a re-run or a localization asks it to measure again name the same fields."""

from app.benchmarks.models import CASE_IDENTITY, Benchmark, CompilerConfig
from workers.harness import Case, identity


def test_a_worker_writes_the_fields_a_benchmark_is_asked_again_by() -> None:
    case = Case(suite="torchbench", model="resnet50", category="vision", batch_size=8, make=None)
    written = identity(case, "inductor", "bf16", "inference")
    benchmark = Benchmark(
        suite="torchbench",
        model="resnet50",
        category="vision",
        mode="inference",
        precision="bf16",
        batch_size=8,
        compiler_config=CompilerConfig(name="inductor"),
    )
    assert tuple(written) == CASE_IDENTITY
    assert benchmark.identity() == written
