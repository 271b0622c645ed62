"""Failed result rows, which anonymous readers see on the run page: no process output."""

from app.suite_runs.rows import failed_rows

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
