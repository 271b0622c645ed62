"""Long commands show progress on a terminal, and nothing elsewhere (logs, pipes, CI)."""

import io
import sys

import pytest

from workers.progress import progress_bar


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def run_bar(stderr: io.StringIO, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(sys, "stderr", stderr)
    with progress_bar("run") as progress:
        for done in range(1, 4):
            progress(done, 3, f"case {done}")
    return stderr.getvalue()


def test_progress_is_silent_off_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    assert run_bar(io.StringIO(), monkeypatch) == ""


def test_progress_draws_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    drawn = run_bar(Terminal(), monkeypatch)
    assert "case 3" in drawn
    assert "3/3" in drawn
    assert drawn.endswith("\n")  # the next line of output starts on a line of its own
