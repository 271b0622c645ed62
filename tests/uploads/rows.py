"""Checks shared by the parser tests."""

from pydantic import TypeAdapter

from app.benchmarks.service import BenchmarkKey
from app.runs.schemas import EnvironmentIn, MachineIn, ResultIn, RunIn
from app.uploads.base import Parsed, UploadFile
from app.uploads.service import sniff


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


def ingestible_run(parsed: Parsed) -> RunIn:
    """A parser's output as a run the ingest accepts: rows, machine, environment and run."""
    machine = {"name": "ci-runner-1", **parsed.machine}
    MachineIn.model_validate(machine)
    EnvironmentIn.model_validate(parsed.environment)
    return RunIn.model_validate(
        {
            **parsed.run,
            "key": "k1",
            "machine": machine,
            "environment": parsed.environment,
            "results": TypeAdapter(list[ResultIn]).validate_python(parsed.results),
        }
    )


def assert_ingestible_and_recognised(
    parsed: Parsed, file: UploadFile, device: str, fmt: str
) -> None:
    """A real file's rows make one ingestible run on ``device``, and ``auto`` names ``fmt``."""
    run = ingestible_run(parsed)
    assert len(run.results) == len(parsed.results) > 0
    assert_one_row_per_series(run.results)
    assert parsed.machine == {"device": device}
    assert sniff(file) == fmt
