"""Tasks are published after commit, never after a rollback."""

import threading
import time
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


def test_a_slow_lane_does_not_hold_up_another() -> None:
    """A delivery waiting on its receiver runs beside detection, not in front of it."""
    release = threading.Event()
    done: list[str] = []

    def slow() -> None:
        release.wait(10)
        done.append("slow")

    def quick() -> None:
        done.append("quick")

    lanes = {"deliver": "notify", "detect": "default"}
    runner = InProcessPublisher({"deliver": slow, "detect": quick}, lanes.__getitem__)
    runner.publish("deliver", {})
    runner.publish("detect", {})
    deadline = time.monotonic() + 5
    while "quick" not in done and time.monotonic() < deadline:
        time.sleep(0.01)
    assert done == ["quick"]  # the slow lane is still waiting
    release.set()
    runner.drain()
    assert done == ["quick", "slow"]
    runner.close()


def test_a_savepoint_rolled_back_keeps_what_the_transaction_queued(database: Database) -> None:
    # after_soft_rollback fires for a savepoint too: the task queued before it must still go
    # once the transaction commits (it was dropped, a refused ingest inside finalize lost it).
    recorder = Recorder()
    database.set_publisher(recorder)
    with database.session_scope() as session:
        enqueue_after_commit(session, "x.do", run_id=1)
        savepoint = session.begin_nested()
        savepoint.rollback()
    assert recorder.sent == [("x.do", {"run_id": 1})]
