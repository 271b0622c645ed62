"""Checks shared by the parser tests."""

from app.benchmarks.service import BenchmarkKey
from app.runs.schemas import ResultIn


def assert_one_row_per_series(results: list[ResultIn]) -> None:
    """No two rows name the same benchmark and metric (the ingest would refuse them)."""
    keys = [
        (
            BenchmarkKey(
                r.suite,
                r.model,
                r.mode,
                r.precision,
                r.config,
                r.batch_size,
                BenchmarkKey.params_to_json(r.params),
            ),
            r.metric,
        )
        for r in results
    ]
    assert len(set(keys)) == len(keys)
