"""A one-line progress bar on stderr, for long commands (run-suite, demo)."""

import sys


def print_progress(done: int, total: int, label: str) -> None:
    """A one-line progress bar on stderr."""
    width = 30
    filled = width * done // total
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {label:<40}")
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()
