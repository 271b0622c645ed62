"""Annotations: made, listed by scope and time, deleted."""

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from app.annotations.models import Annotation
from app.audit import service as audit
from app.core.errors import NotFound


def create_annotation(
    session: Session,
    at: datetime,
    ends_at: datetime | None,
    machine: str | None,
    channel: str | None,
    text: str,
    url: str,
    by: str,
) -> Annotation:
    """A new annotation (validated by ``schemas.AnnotationCreate``); ``by`` names who made it."""
    annotation = Annotation(
        at=at,
        ends_at=ends_at,
        machine=machine,
        channel=channel if machine is not None else None,
        text=text,
        url=url,
        created_by=by[:200],
    )
    session.add(annotation)
    session.flush()
    audit.record(
        session, by, "annotation.create", f"annotation:{annotation.id}", {}, _audited(annotation)
    )
    return annotation


def _audited(annotation: Annotation) -> dict[str, object]:
    return audit.fields(annotation, ("at", "ends_at", "machine", "channel", "text", "url"))


def get_annotation(session: Session, annotation_id: int) -> Annotation:
    """One annotation; NotFound if there is none with this id."""
    annotation = session.get(Annotation, annotation_id)
    if annotation is None:
        raise NotFound(f"no annotation {annotation_id}")
    return annotation


def delete_annotation(session: Session, annotation_id: int, by: str = "") -> Annotation:
    """Delete an annotation; gives back what it was. ``by`` names who did it (audit log)."""
    annotation = get_annotation(session, annotation_id)
    target = f"annotation:{annotation.id}"
    audit.record(session, by or "unknown", "annotation.delete", target, _audited(annotation), {})
    session.delete(annotation)
    session.flush()
    return annotation


def _within(since: datetime | None, until: datetime | None) -> list[ColumnElement[bool]]:
    """Annotations that overlap [since, until): a point inside, or a span across it."""
    where: list[ColumnElement[bool]] = []
    if since is not None:
        where.append(func.coalesce(Annotation.ends_at, Annotation.at) >= since)
    if until is not None:
        where.append(Annotation.at < until)
    return where


def list_annotations(
    session: Session,
    machine: str | None,
    channel: str | None,
    since: datetime | None,
    until: datetime | None,
    offset: int,
    limit: int,
) -> tuple[list[Annotation], int]:
    """A page of annotations, newest first, and how many match in all.

    Those that apply to ``machine`` and ``channel`` (global ones included; neither given: all)
    and overlap [since, until).
    """
    query = select(Annotation).where(*_within(since, until))
    if machine is not None:
        query = query.where(or_(Annotation.machine.is_(None), Annotation.machine == machine))
    if channel is not None:
        query = query.where(or_(Annotation.channel.is_(None), Annotation.channel == channel))
    total = session.scalar(select(func.count()).select_from(query.subquery())) or 0
    page = query.order_by(Annotation.at.desc(), Annotation.id.desc()).offset(offset).limit(limit)
    return list(session.scalars(page)), total


def annotations_for(
    session: Session,
    machine: str,
    channels: Sequence[str],
    since: datetime | None,
    until: datetime | None,
    limit: int,
) -> list[Annotation]:
    """What a chart or an alert group of ``machine`` shows, oldest first.

    Global annotations, the machine's, and those of one of ``channels``, overlapping
    [since, until); at most ``limit`` (the newest kept).
    """
    here = and_(
        Annotation.machine == machine,
        or_(Annotation.channel.is_(None), Annotation.channel.in_(list(channels))),
    )
    query = (
        select(Annotation)
        .where(or_(Annotation.machine.is_(None), here), *_within(since, until))
        .order_by(Annotation.at.desc(), Annotation.id.desc())
        .limit(limit)
    )
    return sorted(session.scalars(query), key=lambda a: (a.at, a.id))


def scope_of(annotation: Annotation) -> str:
    """Where an annotation applies, in words: everywhere, a machine, or a machine's channel."""
    if annotation.machine is None:
        return "everywhere"
    return annotation.machine + (f" · {annotation.channel}" if annotation.channel else "")
