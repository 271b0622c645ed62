"""Verdicts are read by anyone: computed a bounded number at a time, and kept for a while.

Judging a run reads up to ``MAX_RESULTS`` default-branch histories, so a reader who asks
again and again, or for run after run, must not be able to keep the server busy: at most
``AT_ONCE`` computations run in a process, and a request that finds no turn free is answered
503 with ``Retry-After`` at once (``turn()``, taken before the request reads anything: a
waiting request would hold a worker thread and a database connection, and 20-40 of them
stalled the whole server), and an answer is kept ``KEEP_S`` seconds for the run as it stood
(its results, status and thresholds: a further shard or an invalidation computes it again
at once; a triage of a default-branch step shows within ``KEEP_S``).
"""

import copy
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Any

from app.core.errors import DomainError

AT_ONCE = 2
RETRY_AFTER_S = 2  # a computation takes about a second; a client asks again after this
KEEP_S = 60.0
KEPT = 64  # answers kept, the least recently used dropped first

_turns = threading.BoundedSemaphore(AT_ONCE)
_kept: OrderedDict[Hashable, tuple[float, dict[str, Any]]] = OrderedDict()
_kept_lock = threading.Lock()


class Busy(DomainError):
    """Every turn is taken: the request is refused at once, before it reads anything."""

    status_code = 503
    headers = {"Retry-After": str(RETRY_AFTER_S)}  # noqa: RUF012

    def __init__(self) -> None:
        super().__init__("verdicts are being computed for other requests; try again shortly")


@contextmanager
def turn() -> Iterator[None]:
    """A turn to compute verdicts, held for the block; taken at once or not at all.

    Raises:
        Busy: every turn is taken.
    """
    if not _turns.acquire(blocking=False):
        raise Busy()
    try:
        yield
    finally:
        _turns.release()


def kept_or_computed(key: Hashable, compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The answer kept under ``key`` if it is recent, else ``compute()``, kept.

    The caller holds a ``turn()``. Each caller gets its own copy, free to change.
    """
    found = _recent(key)
    if found is None:
        found = compute()
        with _kept_lock:
            _kept[key] = (time.monotonic() + KEEP_S, found)
            while len(_kept) > KEPT:
                _kept.popitem(last=False)
    return copy.deepcopy(found)


def _recent(key: Hashable) -> dict[str, Any] | None:
    with _kept_lock:
        entry = _kept.get(key)
        if entry is None or entry[0] < time.monotonic():
            _kept.pop(key, None)
            return None
        _kept.move_to_end(key)
        return entry[1]
