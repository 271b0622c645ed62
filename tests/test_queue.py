"""Tasks are published after commit, never after a rollback."""

from typing import Any

import pytest

from app.core.db import Database
from app.core.queue import InProcessPublisher, enqueue_after_commit


class Recorder:
    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def publish(self, name: str, kwargs: dict[str, Any]) -> None:
        self.sent.append((name, kwargs))


def test_published_after_commit_only(database: Database) -> None:
    recorder = Recorder()
    database.set_publisher(recorder)
    with database.session_scope() as session:
        enqueue_after_commit(session, "x.do", run_id=1)
        assert recorder.sent == []  # not before the commit
    assert recorder.sent == [("x.do", {"run_id": 1})]

    def fail_after_enqueue() -> None:
        with database.session_scope() as session:
            enqueue_after_commit(session, "x.do", run_id=2)
            raise RuntimeError("rolled back")

    with pytest.raises(RuntimeError):
        fail_after_enqueue()
    with database.session_scope():
        pass
    assert recorder.sent == [("x.do", {"run_id": 1})]


def test_in_process_runner_runs_jobs_and_survives_errors() -> None:
    done: list[int] = []

    def job(*, n: int) -> None:
        if n == 2:
            raise ValueError("boom")
        done.append(n)

    runner = InProcessPublisher({"job": job})
    for n in (1, 2, 3):
        runner.publish("job", {"n": n})
    runner.publish("unknown", {})
    runner.drain()
    assert done == [1, 3]
    runner.close()
