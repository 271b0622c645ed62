"""Benchmark and series ids remembered across requests, forgotten when they may be wrong.

Every nightly run names the same benchmarks and series again, and looking their ids up again
is a noticeable share of storing a run (the numbers: bench/ingest.py, and the commits that
added and weighed this module). Benchwatch only adds
catalog rows, so an id it has read stays right for as long as that row stays. What would make
it wrong (a benchmark or series deleted, its table truncated, its key columns changed, or the
database restored from a dump, where ids created since the dump are gone and will be handed
out again) changes the token of the ``catalog_generation`` row: database triggers change it
on deletes, truncates and key updates, and ``publish_changes`` changes it as a transaction
that created catalog rows commits. Every lookup reads the token first, and ids remembered
under another token are forgotten.

Only ids read from committed rows are remembered, never those the current transaction
inserted: it may still roll back.
"""

import secrets
import threading
from collections.abc import Callable, Hashable, Iterable
from typing import Any, TypeVar, cast

from sqlalchemy import event, select, update
from sqlalchemy.orm import Session

from app.benchmarks.models import CatalogGeneration

K = TypeVar("K", bound=Hashable)
CHANGED = "benchwatch.catalog_changed"  # session.info: this transaction created catalog rows
TOKEN_READ = "benchwatch.catalog_token"  # session.info: (transaction, token it read)
LIMIT = 500_000  # ids remembered per process (some 200 bytes each) before all are forgotten

_TOKEN = select(CatalogGeneration.token).where(CatalogGeneration.id == 1)
_NEW_TOKEN = update(CatalogGeneration).where(CatalogGeneration.id == 1)


class KnownIds:
    """Ids by key, in named spaces (one per kind of row and scope), under one token."""

    def __init__(self, limit: int = LIMIT) -> None:
        self._lock = threading.Lock()
        self._token: str | None = None
        self._spaces: dict[Hashable, dict[Any, int]] = {}
        self._count = 0
        self._limit = limit

    def ids(
        self,
        session: Session,
        space: Hashable,
        keys: Iterable[K],
        find: Callable[[list[K]], dict[K, int]],
    ) -> dict[K, int]:
        """The ids of ``keys`` that exist: remembered ones, and those ``find`` reads.

        ``find(keys)`` must read committed rows only (run it before inserting any).
        """
        token = _token(session)
        known = self._known(token, space)
        found: dict[K, int] = {}
        unknown: list[K] = []
        for key in keys:
            if (known_id := known.get(key)) is None:
                unknown.append(key)
            else:
                found[key] = known_id
        if unknown:
            read = find(unknown)
            self._remember(token, space, read)
            found |= read
        return found

    def _known(self, token: str | None, space: Hashable) -> dict[Any, int]:
        with self._lock:
            if token != self._token:
                self._forget(token)
            return self._spaces.get(space, {})

    def _remember(self, token: str | None, space: Hashable, ids: dict[K, int]) -> None:
        if token is None:  # no generation row: nothing can tell when ids go wrong
            return
        with self._lock:
            if token != self._token:  # another thread saw a newer token meanwhile
                return
            if self._count + len(ids) > self._limit:
                self._forget(token)
            known = self._spaces.setdefault(space, {})
            self._count += len(ids.keys() - known.keys())
            known.update(ids)

    def _forget(self, token: str | None) -> None:
        self._token = token
        self._spaces = {}
        self._count = 0


KNOWN = KnownIds()


def _token(session: Session) -> str | None:
    """The generation token, read once per transaction: its first read is the oldest."""
    transaction = session.get_transaction()
    read = session.info.get(TOKEN_READ)
    if read is not None and read[0] is transaction:
        return cast(str | None, read[1])
    token = session.connection().scalar(_TOKEN)
    session.info[TOKEN_READ] = (transaction, token)
    return token


def created(session: Session) -> None:
    """Note that this transaction created benchmarks or series (see ``publish_changes``)."""
    session.info[CHANGED] = True


def publish_changes(session: Session) -> None:
    """Change the token if this transaction created catalog rows: run as it commits.

    The update locks the generation row until commit; taken last, that lock cannot be part of
    a deadlock with the catalog rows that concurrent uploads insert.
    """
    if session.info.pop(CHANGED, False):
        session.connection().execute(_NEW_TOKEN.values(token=secrets.token_hex(16)))


def install() -> None:
    """Publish catalog changes as each session commits (``app.runtime.install_listeners``)."""
    if not event.contains(Session, "before_commit", publish_changes):
        event.listen(Session, "before_commit", publish_changes)
