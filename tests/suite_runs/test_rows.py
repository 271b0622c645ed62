"""A worker's rows: failed ones (read by anonymous readers: no process output), the payload."""

from app.runs.schemas import RunIn
from app.suite_runs.rows import PROFILE, failed_rows, payload_rows
from tests.factories import example_run

IDENT = {"suite": "torchbench", "model": "bert"}


def test_a_failed_rows_reason_leaves_the_commands_output_out() -> None:
    reason = "the command exited with status 7; output: connecting to postgres://u:hunter2@db"
    latency, accuracy = failed_rows(IDENT, reason)
    assert "hunter2" not in latency["reason"]
    assert latency["reason"].startswith("the command exited with status 7")
    assert accuracy["text_value"] == "fail_to_run"


def test_an_out_of_memory_is_still_named_from_the_output() -> None:
    reason = "the shard process was killed by SIGKILL; stderr: CUDA out of memory. token=abc"
    latency, accuracy = failed_rows(IDENT, reason)
    assert "token=abc" not in latency["reason"]
    assert accuracy["text_value"] == "OOM"


def test_a_kernel_profile_leaves_its_row_for_the_payloads_list() -> None:
    case = {"suite": "smoke", "model": "mlp", "mode": "inference", "precision": "fp32"}
    profile = {"timing": "cpu_self", "calls": 3, "wall_us": 50.0, "kernels": []}
    rows = [
        {**case, "config": "default", "metric": "latency", "value": 1.0},
        {
            **case,
            "config": "default",
            "metric": "kernel_count",
            "value": 4.0,
            "extra": {"counted": "aten ops", PROFILE: profile},
        },
    ]
    parts = payload_rows(rows)
    assert parts["results"][0] == rows[0]
    assert parts["results"][1]["extra"] == {"counted": "aten ops"}
    assert parts["kernel_profiles"] == [{**case, "config": "default", **profile}]
    assert PROFILE in rows[1]["extra"]  # the worker's rows are left as they were
    RunIn.model_validate({**example_run(), **parts})  # the payload takes them as they are
