"""Record writes in the audit log, and read it back."""

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.audit.models import AuditEntry
from app.core.db import utcnow

MAX_TEXT = 500  # a longer value (a note, a reason) is cut to this many characters
MAX_FIELDS = 30


def _small(value: Any) -> Any:
    """A JSON-able, bounded copy of one field's value."""
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, list | tuple | set):
        return [_small(v) for v in list(value)[:MAX_FIELDS]]
    if isinstance(value, Mapping):
        return {str(k)[:100]: _small(v) for k, v in list(value.items())[:MAX_FIELDS]}
    return str(value)[:MAX_TEXT]


def fields(row: Any, names: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """Those attributes of a row, as the log stores them."""
    return {name: _small(getattr(row, name)) for name in names}


def record(
    session: Session,
    actor: str,
    action: str,
    target: str,
    before: Mapping[str, Any] | None = None,
    after: Mapping[str, Any] | None = None,
) -> AuditEntry:
    """Add one entry to the session: it commits (or not) with the write it records.

    Only the fields that differ are kept when both sides are given.
    """
    old, new = dict(before or {}), dict(after or {})
    if old and new:
        changed = {k for k in old.keys() | new.keys() if old.get(k) != new.get(k)}
        old = {k: v for k, v in old.items() if k in changed}
        new = {k: v for k, v in new.items() if k in changed}
    entry = AuditEntry(
        at=utcnow(),
        actor=actor[:200],
        action=action[:64],
        target=target[:128],
        before=_small(old),
        after=_small(new),
    )
    session.add(entry)
    return entry


def list_entries(
    session: Session,
    *,
    action: str | None = None,
    target: str | None = None,
    actor: str | None = None,
    since: datetime | None = None,
    before_id: int | None = None,
    limit: int = 100,
) -> list[AuditEntry]:
    """Entries newest first; ``action`` and ``target`` match exactly or as a prefix."""
    query = select(AuditEntry)
    if action:
        query = query.where(AuditEntry.action.startswith(action, autoescape=True))
    if target:
        query = query.where(AuditEntry.target.startswith(target, autoescape=True))
    if actor:
        query = query.where(AuditEntry.actor.contains(actor, autoescape=True))
    if since is not None:
        query = query.where(AuditEntry.at >= since)
    if before_id is not None:
        query = query.where(AuditEntry.id < before_id)
    return list(session.scalars(query.order_by(AuditEntry.id.desc()).limit(limit)))
