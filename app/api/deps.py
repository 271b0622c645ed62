"""Annotated dependencies shared by the routers."""

from typing import Annotated

from fastapi import Depends, Query, Request

from app.core.db import SessionDep as SessionDep  # routes take it from here, with the rest
from app.core.names import PROJECT_LENGTH, PROJECT_PATTERN
from app.tokens.auth import Actor, read_access, require_actor, require_scope
from app.tokens.models import ApiToken


async def raw_body(request: Request) -> bytes:
    """The request's body as sent (read once: the JSON validation reads the same bytes)."""
    return await request.body()


RawBody = Annotated[bytes, Depends(raw_body)]
IngestToken = Annotated[ApiToken, Depends(require_scope("ingest"))]
TriageActor = Annotated[Actor, Depends(require_actor("triage"))]
ReadAccess = Depends(read_access)
TriggerToken = Annotated[ApiToken, Depends(require_scope("trigger"))]
# The project filter of every list: absent, every project; an unknown one matches nothing.
ProjectQuery = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=PROJECT_LENGTH,
        pattern=PROJECT_PATTERN,
        description="Only this project's (absent: every project; an unknown one: nothing)",
    ),
]
