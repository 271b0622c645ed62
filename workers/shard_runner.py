"""The worker's side of a shard: run it in a child process, with a timeout and a heartbeat.

The child (``python -m workers.shard_child``) gets its own process group, so a timeout kills it
and everything it started (compile workers, all-reduce ranks). A crash, a signal (the kernel's
OOM killer sends SIGKILL) or a hang becomes a reason with the tail of the child's stderr; the
worker process that called this lives on.
"""

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHILD = "workers.shard_child"  # the module the child runs
STDERR_TAIL = 1500  # characters of the child's stderr kept in a failure reason
# The one worker setting a built-in shard's child reads (``workers.shard_child``): its cores.
CHILD_SETTINGS = ("BENCHWATCH_PIN_CORES",)


def worker_environment(keep: tuple[str, ...] = ()) -> dict[str, str]:
    """The worker's environment less its ``BENCHWATCH_*`` settings, but for those in ``keep``.

    What a shard's child process inherits: the settings hold the database and broker URLs,
    the token pepper, the SMTP and GitHub secrets, none of which a benchmark (or an operator's
    command, or anything it imports) needs to see.
    """
    return {k: v for k, v in os.environ.items() if not k.startswith("BENCHWATCH_") or k in keep}


@dataclass(frozen=True)
class ShardOutcome:
    """The rows a shard measured, or why it has none."""

    rows: list[dict[str, Any]] | None
    reason: str = ""
    retry: bool = True  # False: trying again would fail the same way (a file that does not parse)
    # The kernel profiles its output carried (a native run's kernel_profiles), without code.
    profiles: list[dict[str, Any]] = field(default_factory=list)


def run_shard_process(
    spec: dict[str, Any],
    *,
    timeout_s: float,
    heartbeat: Callable[[], bool],
    every_s: float,
) -> ShardOutcome:
    """Run the shard; ``heartbeat`` is called every ``every_s`` and stops it by returning False."""
    with tempfile.TemporaryDirectory(prefix="benchwatch-shard-") as folder:
        # The spec goes in a file, not a pipe: a child that dies at once cannot break the write.
        given, out, err = (Path(folder) / name for name in ("spec.json", "rows.json", "stderr.txt"))
        given.write_text(json.dumps(spec))
        with err.open("w") as stderr:
            child = subprocess.Popen(
                [sys.executable, "-m", CHILD, str(given), str(out), str(os.getpid())],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                env=worker_environment(keep=CHILD_SETTINGS),
                start_new_session=True,
            )
            try:
                ended = _wait(child, timeout_s, heartbeat, every_s)
            except BaseException:  # the heartbeat failed (database gone) or the worker stops
                _kill(child)
                raise
        if ended is not None:
            return ShardOutcome(None, f"{ended}; stderr: {_tail(err)}")
        if child.returncode != 0:
            return ShardOutcome(None, f"{_describe(child.returncode)}; stderr: {_tail(err)}")
        return ShardOutcome(json.loads(out.read_text()))


def run_command_process(
    argv: list[str],
    *,
    cwd: str | None,
    env: dict[str, str],
    logs: Path,
    timeout_s: float,
    heartbeat: Callable[[], bool],
    every_s: float,
) -> str | None:
    """Run an operator's command (no shell) as a shard: None when it exited 0, else why not.

    Its stdout and stderr go to files in ``logs``; a reason ends with the tail of its stderr
    (of its stdout when stderr is empty). It gets its own process group, killed whole on a
    timeout or a lost lease, and on Linux dies with the worker process that started it.
    """
    out, err = logs / "stdout.txt", logs / "stderr.txt"
    with out.open("w") as stdout, err.open("w") as stderr:
        try:
            child = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                start_new_session=True,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )
        except OSError as error:  # no such program or directory, not executable
            return f"the command could not be started: {error}"
        try:
            ended = _wait(child, timeout_s, heartbeat, every_s)
        except BaseException:
            _kill(child)
            raise
    tail = _tail(err) if err.stat().st_size else _tail(out)
    if ended is not None:
        return f"{ended.replace('the shard', 'the command', 1)}; output: {tail}"
    if child.returncode != 0:
        described = _describe(child.returncode).replace("the shard process", "the command")
        return f"{described}; output: {tail}"
    return None


def _die_with_parent() -> None:
    """In the child, before exec: SIGKILL when the thread that started it ends (Linux)."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)


def _wait(
    child: subprocess.Popen[bytes],
    timeout_s: float,
    heartbeat: Callable[[], bool],
    every_s: float,
) -> str | None:
    """None when the child exited by itself; else why it was killed."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            child.wait(timeout=max(min(every_s, deadline - time.monotonic()), 0.01))
            return None
        except subprocess.TimeoutExpired:
            if time.monotonic() >= deadline:
                _kill(child)
                return f"the shard did not finish within {timeout_s:.0f} s and was killed"
            if not heartbeat():
                _kill(child)
                return "the shard's lease was lost to another worker; this attempt was stopped"


def _kill(child: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGKILL)
    child.wait()


def _describe(returncode: int) -> str:
    if returncode < 0:
        name = signal.Signals(-returncode).name
        hint = " (out of memory?)" if returncode == -signal.SIGKILL else ""
        return f"the shard process was killed by {name}{hint}"
    return f"the shard process exited with status {returncode}"


def _tail(path: Path) -> str:
    lines = [
        line
        for line in path.read_text(errors="replace").splitlines()
        if not line.startswith(("USDT:", "STAGE:"))
    ]
    return "\n".join(lines)[-STDERR_TAIL:] or "(empty)"
