"""Progress bars on stderr for long commands (run-suite, demo, upload), drawn by tqdm.

tqdm draws nothing when stderr is not a terminal (a pipe, a log file, a CI job's output), so
callers need no check of their own and logs carry no carriage-return noise.
"""

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Never, Protocol

from tqdm import tqdm


class Progress(Protocol):
    """What long work calls as it goes: ``done`` out of ``total``, and what it is doing now."""

    def __call__(self, done: int, total: int, label: str = "") -> None:
        """Report ``done`` out of ``total``; ``label`` names the work in hand."""


@contextmanager
def progress_bar(unit: str, *, in_bytes: bool = False) -> Iterator[Progress]:
    """A bar on stderr, moved by calling ``progress(done, total, label="")``.

    Args:
        unit: what is counted, e.g. "run".
        in_bytes: count bytes, shown as KiB, MiB, ... per second.

    Yields:
        The callback: ``done`` out of ``total``, and what is being done now. A ``done``
        below the last one (an upload retried from its start) starts the bar again.
    """
    bar: tqdm[Never] | None = None  # made on the first report, when the total is known

    def progress(done: int, total: int, label: str = "") -> None:
        nonlocal bar
        if bar is None:
            bar = tqdm(
                desc=label,
                total=total,
                unit=unit,
                unit_scale=in_bytes,
                unit_divisor=1024 if in_bytes else 1000,
                file=sys.stderr,
                disable=None,  # None: off unless stderr is a terminal
                dynamic_ncols=True,
            )
        elif done < bar.n or total != bar.total:
            bar.reset(total)
        if label:
            bar.set_description_str(label, refresh=False)
        bar.update(done - bar.n)

    try:
        yield progress
    finally:
        if bar is not None:
            bar.close()
