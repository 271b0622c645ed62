"""Silences: time-boxed matchers that hold notices back; they end by themselves."""

from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.audit import service as audit
from app.core.db import utcnow
from app.core.errors import NotFound
from app.core.pagination import count_and_page
from app.core.queue import enqueue_after_commit
from app.jobs import DISPATCH_NOTICES
from app.notifications.models import Notice, Silence
from app.tokens.models import ApiToken
from app.tokens.service import ProjectNotAllowed


def state_of(silence: Silence, now: datetime) -> str:
    """``pending`` (not begun), ``active`` or ``expired``."""
    if now < silence.starts_at:
        return "pending"
    return "active" if now < silence.ends_at else "expired"


def describe(silence: Silence, now: datetime) -> dict[str, Any]:
    """A silence for the read model."""
    return {
        "id": silence.id,
        "matchers": silence.matchers,
        "starts_at": silence.starts_at,
        "ends_at": silence.ends_at,
        "comment": silence.comment,
        "created_by": silence.created_by,
        "created_at": silence.created_at,
        "state": state_of(silence, now),
    }


def list_silences(
    session: Session, state: str | None, offset: int, limit: int
) -> tuple[list[dict[str, Any]], int]:
    """A page of silences, those ending last first; ``state`` filters (None: all)."""
    now = utcnow()
    query = select(Silence)
    if state == "active":
        query = query.where(Silence.starts_at <= now, Silence.ends_at > now)
    elif state == "pending":
        query = query.where(Silence.starts_at > now)
    elif state == "expired":
        query = query.where(Silence.ends_at <= now)
    silences, total = count_and_page(
        session, query, [Silence.ends_at.desc(), Silence.id.desc()], offset, limit
    )
    return [describe(s, now) for s in silences], total


def create_silence(
    session: Session,
    matchers: dict[str, Any],
    starts_at: datetime | None,
    ends_at: datetime,
    comment: str,
    by: str,
) -> Silence:
    """A new silence (validated by ``schemas.SilenceCreate``); ``by`` names who made it."""
    now = utcnow()
    silence = Silence(
        matchers=matchers,
        starts_at=starts_at or now,
        ends_at=ends_at,
        comment=comment,
        created_by=by[:200],
        created_at=now,
    )
    session.add(silence)
    session.flush()
    audit.record(session, by, "silence.create", f"silence:{silence.id}", {}, _audited(silence))
    return silence


def scoped(token: ApiToken, matchers: dict[str, Any], loc: str) -> dict[str, Any]:
    """The matchers a token may silence with: a project's token silences its own project only.

    A token limited to a project gets that project added to matchers that name none; one
    that names another project, or several, or a glob, is refused (``loc`` says where).

    Raises:
        ProjectNotAllowed: the matchers reach past the token's project.
    """
    if token.project is None:
        return matchers
    given = matchers.get("project")
    if given is None:
        return {**matchers, "project": [token.project]}
    if given != [token.project]:
        raise ProjectNotAllowed(token, ", ".join(given), loc)
    return matchers


def _audited(silence: Silence) -> dict[str, Any]:
    return audit.fields(silence, ("matchers", "starts_at", "ends_at", "comment"))


def get_silence(session: Session, silence_id: int) -> Silence:
    """One silence; NotFound if there is none with this id."""
    silence = session.get(Silence, silence_id)
    if silence is None:
        raise NotFound(f"no silence {silence_id}")
    return silence


def expire_silence(
    session: Session, silence_id: int, by: str = "", token: ApiToken | None = None
) -> Silence:
    """End a silence now (it stays listed as expired); one already over is left as it is.

    ``by`` names who ended it (the audit log). A ``token`` limited to a project may end
    only a silence of that project alone.

    Raises:
        NotFound: no such silence.
        ProjectNotAllowed: the token's project is not the only one the silence holds back.
    """
    silence = get_silence(session, silence_id)
    if token is not None and token.project is not None:
        project = silence.matchers.get("project")
        if project != [token.project]:
            held = ", ".join(project) if project else "every project"
            raise ProjectNotAllowed(token, held, f"silence {silence.id}")
    now = utcnow()
    if silence.ends_at > now:
        before = audit.fields(silence, ("starts_at", "ends_at"))
        _release_held(session, silence.starts_at)
        silence.ends_at = now
        silence.starts_at = min(silence.starts_at, now)
        after = audit.fields(silence, ("starts_at", "ends_at"))
        audit.record(
            session, by or "unknown", "silence.end", f"silence:{silence.id}", before, after
        )
    session.flush()
    return silence


def _release_held(session: Session, since: datetime) -> None:
    """What was held back while a silence stood goes out now, not at the next reminder.

    The newest silenced notice of each subscription and group since ``since``, unless a later
    one of theirs was sent, is planned again; the sweep queued after commit checks it against
    the silences still in force (another may hold it) and sends it once.
    """
    held = session.scalars(
        select(Notice)
        .where(Notice.state == "silenced", Notice.created_at >= since, Notice.group_id.is_not(None))
        .order_by(Notice.created_at.desc(), Notice.id.desc())
    ).all()
    seen: set[tuple[int, int | None]] = set()
    for notice in held:
        pair = (notice.subscription_id, notice.group_id)
        if pair in seen:
            continue
        seen.add(pair)
        later_sent = session.scalar(
            select(Notice.id).where(
                Notice.subscription_id == notice.subscription_id,
                Notice.group_id == notice.group_id,
                Notice.state == "sent",
                Notice.created_at > notice.created_at,
            )
        )
        if later_sent is None:
            notice.state = "planned"
    if seen:
        enqueue_after_commit(session, DISPATCH_NOTICES)
