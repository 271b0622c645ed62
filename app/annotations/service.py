"""Annotations: made, listed by scope and time, deleted."""

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from app.annotations.models import Annotation
from app.audit import service as audit
from app.core.errors import NotFound
from app.core.pagination import count_and_page
from app.tokens.models import ApiToken
from app.tokens.service import ProjectNotAllowed, check_project


def create_annotation(
    session: Session,
    at: datetime,
    ends_at: datetime | None,
    machine: str | None,
    channel: str | None,
    text: str,
    url: str,
    by: str,
    project: str | None = None,
    token: ApiToken | None = None,
) -> Annotation:
    """A new annotation (validated by ``schemas.AnnotationCreate``); ``by`` names who made it.

    ``project`` None: every project's. A ``token`` limited to a project may make only that
    project's (``body.project`` names where the request said it).

    Raises:
        ProjectNotAllowed: the annotation would reach past the token's project.
    """
    if token is not None:
        check_annotation_project(token, project, "body.project")
    annotation = Annotation(
        at=at,
        ends_at=ends_at,
        machine=machine,
        channel=channel if machine is not None else None,
        project=project,
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
    fields = ("at", "ends_at", "machine", "channel", "project", "text", "url")
    return audit.fields(annotation, fields)


def check_annotation_project(token: ApiToken, project: str | None, loc: str) -> None:
    """403 unless ``token`` may write an annotation of ``project`` (None: every project's).

    The tokens' project rule (``tokens.service.check_project``), with one more refusal: a
    token limited to a project makes and deletes none that applies to every project.
    """
    if project is None:
        if token.project is not None:
            raise ProjectNotAllowed(token, "every project", loc)
        return
    check_project(token, project, loc)


def get_annotation(session: Session, annotation_id: int) -> Annotation:
    """One annotation; NotFound if there is none with this id."""
    annotation = session.get(Annotation, annotation_id)
    if annotation is None:
        raise NotFound(f"no annotation {annotation_id}")
    return annotation


def delete_annotation(
    session: Session, annotation_id: int, by: str = "", token: ApiToken | None = None
) -> Annotation:
    """Delete an annotation; gives back what it was. ``by`` names who did it (audit log).

    A ``token`` limited to a project deletes only that project's annotations.

    Raises:
        NotFound: no such annotation.
        ProjectNotAllowed: the annotation is another project's, or every project's.
    """
    annotation = get_annotation(session, annotation_id)
    if token is not None:
        check_annotation_project(token, annotation.project, "path.annotation_id")
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
    return count_and_page(
        session, query, [Annotation.at.desc(), Annotation.id.desc()], offset, limit
    )


def annotations_for(
    session: Session,
    machine: str,
    channels: Sequence[str],
    projects: Sequence[str],
    since: datetime | None,
    until: datetime | None,
    limit: int,
) -> list[Annotation]:
    """What a chart or an alert group of ``machine`` shows, oldest first.

    Global annotations, the machine's, and those of one of ``channels``, overlapping
    [since, until); at most ``limit`` (the newest kept). Only those of every project and
    of one of ``projects`` (what the chart draws): one team's notes are not another's chart.
    """
    here = and_(
        Annotation.machine == machine,
        or_(Annotation.channel.is_(None), Annotation.channel.in_(list(channels))),
    )
    ours = or_(Annotation.project.is_(None), Annotation.project.in_(list(projects)))
    query = (
        select(Annotation)
        .where(or_(Annotation.machine.is_(None), here), ours, *_within(since, until))
        .order_by(Annotation.at.desc(), Annotation.id.desc())
        .limit(limit)
    )
    return sorted(session.scalars(query), key=lambda a: (a.at, a.id))


def scope_of(annotation: Annotation) -> str:
    """Where an annotation applies, in words: everywhere, a machine, or a machine's channel."""
    if annotation.machine is None:
        return "everywhere"
    return annotation.machine + (f" · {annotation.channel}" if annotation.channel else "")
