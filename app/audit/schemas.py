"""The audit log as the API answers it."""

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict


class AuditEntryRead(BaseModel):
    """One recorded write: who, when, what (``action`` on ``target``), before and after."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    at: datetime
    actor: str
    action: str
    target: str
    before: dict[str, Any]
    after: dict[str, Any]


class AuditPage(BaseModel):
    """Entries newest first; pass ``next_before`` as ``before`` for older ones."""

    items: list[AuditEntryRead]
    next_before: int | None = None
