"""Verdicts are read by anyone: computed a bounded number at a time, and kept for a while.

Judging a run reads up to ``MAX_RESULTS`` default-branch histories, so a reader who asks
again and again, or for run after run, must not be able to keep the server busy: at most
``AT_ONCE`` computations run in a process (a request that waits ``WAIT_S`` for a turn gets a
503), and an answer is kept ``KEEP_S`` seconds for the run as it stood (its results, status
and thresholds: a further shard or an invalidation computes it again at once; a triage of a
default-branch step shows within ``KEEP_S``).
"""

import copy
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

from app.core.errors import DomainError

AT_ONCE = 2
WAIT_S = 10.0
KEEP_S = 60.0
KEPT = 64  # answers kept, the least recently used dropped first

_turns = threading.BoundedSemaphore(AT_ONCE)
_kept: OrderedDict[Hashable, tuple[float, dict[str, Any]]] = OrderedDict()
_kept_lock = threading.Lock()


class Busy(DomainError):
    """Every turn was taken for longer than a request waits."""

    status_code = 503

    def __init__(self) -> None:
        super().__init__("verdicts are being computed for other requests; try again shortly")


def kept_or_computed(key: Hashable, compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The answer kept under ``key`` if it is recent, else ``compute()`` in a turn, kept.

    Each caller gets its own copy, free to change.

    Raises:
        Busy: no turn came within ``WAIT_S``.
    """
    found = _recent(key)
    if found is not None:
        return copy.deepcopy(found)
    if not _turns.acquire(timeout=WAIT_S):
        raise Busy()
    try:
        found = _recent(key)  # computed while this request waited for its turn
        if found is None:
            found = compute()
            with _kept_lock:
                _kept[key] = (time.monotonic() + KEEP_S, found)
                while len(_kept) > KEPT:
                    _kept.popitem(last=False)
        return copy.deepcopy(found)
    finally:
        _turns.release()


def _recent(key: Hashable) -> dict[str, Any] | None:
    with _kept_lock:
        entry = _kept.get(key)
        if entry is None or entry[0] < time.monotonic():
            _kept.pop(key, None)
            return None
        _kept.move_to_end(key)
        return entry[1]
