"""The processes a provider runs, and what a build comes to: shared by the cache and pip.

A build runs in a process group of its own, killed at its timeout or when the heartbeat says
the lease was lost; its output is kept in a file and its tail quoted in a reason.
"""

import contextlib
import fcntl
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from workers.shard_runner import _die_with_parent

ENV = "env"  # the directory of an entry a provider builds into ($BENCHWATCH_ENV_DIR)
TAIL = 1500  # characters of a build's output kept in a reason
LAST_LINE_BYTES = 65536  # how much of a provider's stdout is read for its answer
Heartbeat = Callable[[], bool]


@dataclass(frozen=True)
class Outcome:
    """What a build came to; ``lasting``: the same spec would come to it again."""

    answer: dict[str, str]
    lasting: bool = True


def unbuildable(reason: str, *, lasting: bool = True) -> Outcome:
    """The outcome of a build that cannot be made (``lasting``: the same spec never will)."""
    return Outcome({"unbuildable": reason}, lasting)


class PrepareStopped(Exception):
    """The heartbeat said stop (the lease was lost); the build was killed, nothing kept."""


def run_process(
    argv: list[str],
    *,
    env: dict[str, str],
    stdin: Path | None,
    stdout: Path,
    stderr: Path | None,
    timeout_s: float,
    beat: Heartbeat,
    every_s: float,
) -> int | None:
    """Run ``argv`` (no shell) in a process group of its own: its status, None if timed out.

    Killed (the whole group) at ``timeout_s``; ``stderr`` None: into ``stdout``.

    Raises:
        OSError: it could not be started.
        PrepareStopped: the heartbeat said stop (the group was killed).
    """
    with contextlib.ExitStack() as files:
        given = files.enter_context(stdin.open("rb")) if stdin else subprocess.DEVNULL
        out = files.enter_context(stdout.open("wb"))
        err = files.enter_context(stderr.open("wb")) if stderr else subprocess.STDOUT
        child = subprocess.Popen(
            argv,
            env=env,
            stdin=given,
            stdout=out,
            stderr=err,
            start_new_session=True,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            try:
                return child.wait(timeout=max(min(every_s, deadline - time.monotonic()), 0.01))
            except subprocess.TimeoutExpired:
                if time.monotonic() >= deadline:
                    kill(child)
                    return None
                if not beat():
                    raise PrepareStopped("the lease was lost during the build") from None
    except BaseException:
        kill(child)
        raise


@contextlib.contextmanager
def flock(path: Path, *, wait: bool) -> Iterator[bool]:
    """An exclusive lock on ``path`` (made if need be), between processes and threads alike.

    True while held; False at once when ``wait`` is False and another holds it.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def kill(child: subprocess.Popen[bytes]) -> None:
    """Kill a build's whole process group and reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGKILL)
    child.wait()


def exited(code: int) -> str:
    """How a process ended, in words."""
    if code < 0:
        return f"was killed by {signal.Signals(-code).name}"
    return f"exited with status {code}"


def tail(path: Path) -> str:
    """The end of a build's output, for a reason."""
    with path.open("rb") as file:
        file.seek(max(path.stat().st_size - 4 * TAIL, 0))
        text = file.read().decode(errors="replace").strip()
    return text[-TAIL:] or "(empty)"


def last_line(path: Path) -> str:
    """A provider's last non-empty stdout line: its answer."""
    with path.open("rb") as file:
        file.seek(max(path.stat().st_size - LAST_LINE_BYTES, 0))
        lines = file.read().decode(errors="replace").splitlines()
    return next((line.strip() for line in reversed(lines) if line.strip()), "")


def normal_name(name: str) -> str:
    """A distribution's name as packaging compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def write_whole(path: Path, text: str) -> None:
    """Write ``path`` whole or not at all."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text)
    partial.replace(path)


def tree_size(directory: Path) -> int:
    """Bytes of the files under ``directory`` (links counted as themselves, not followed)."""
    total = 0
    for folder, _, files in os.walk(directory):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_size
    return total
