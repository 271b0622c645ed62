"""The annotations page: the newest annotations, and a form to add one (scope ``triage``).

The form posts as the silences form does (``access.form_actor``): from this server's
own page, signed in, with the page's CSRF value; it is checked by the API's own schema, and a
refused form comes back as typed, each problem beside its field.
"""

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Form
from pydantic import ValidationError
from sqlalchemy.orm import Session

from app.annotations import service
from app.annotations.schemas import MAX_TEXT, AnnotationCreate
from app.core.errors import describe
from app.core.urls import MAX_URL_LENGTH
from app.dashboard.queries import machine_names

SHOWN = 200  # the newest annotations listed on the page
FormErrors = list[dict[str, str]]  # {"top": form field, "loc": where in it, "message"}
DONE = {"added": "Annotation added.", "deleted": "Annotation deleted."}
"""What the page says after a form did its work (``?done=``): fixed text, nothing reflected."""


@dataclass(frozen=True)
class AnnotationForm:
    """The annotation form as typed: times are UTC (``YYYY-MM-DDTHH:MM``)."""

    at: str = ""
    ends_at: str = ""
    machine: str = ""
    channel: str = ""
    text: str = ""
    url: str = ""


def annotation_form(
    at: Annotated[str, Form(max_length=40)] = "",
    ends_at: Annotated[str, Form(max_length=40)] = "",
    machine: Annotated[str, Form(max_length=200)] = "",
    channel: Annotated[str, Form(max_length=200)] = "",
    text: Annotated[str, Form(max_length=MAX_TEXT * 4)] = "",
    url: Annotated[str, Form(max_length=MAX_URL_LENGTH * 2)] = "",
) -> AnnotationForm:
    """Dependency: the posted annotation form."""
    return AnnotationForm(at, ends_at, machine, channel, text, url)


def _utc(text: str) -> str | None:
    """A time typed without a zone is UTC (what the form says); empty: None."""
    text = text.strip()
    if not text:
        return None
    has_zone = text.endswith(("Z", "z")) or "+" in text[10:] or "-" in text[10:]
    return text if has_zone else f"{text}+00:00"


def parse_annotation(form: AnnotationForm) -> tuple[AnnotationCreate | None, FormErrors]:
    """The annotation to make, or the form's problems, each under its field."""
    body = {
        "at": _utc(form.at),
        "ends_at": _utc(form.ends_at),
        "machine": form.machine.strip() or None,
        "channel": form.channel.strip() or None,
        "text": form.text.strip(),
        "url": form.url.strip(),
    }
    try:
        return AnnotationCreate.model_validate(body), []
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            described = describe(dict(error))
            top = str(error["loc"][0]) if error["loc"] else "form"
            message = described["message"].removeprefix("Value error, ")
            problems.append({"top": top, "loc": top, "message": message})
        return None, problems


def page_context(
    session: Session,
    may_annotate: bool,
    form: AnnotationForm | None = None,
    errors: FormErrors | None = None,
    done: str | None = None,
) -> dict[str, Any]:
    """What the page shows: the newest annotations, and the form if ``may_annotate``."""
    found, total = service.list_annotations(session, None, None, None, None, 0, SHOWN)
    return {
        "annotations": [
            {
                "id": a.id,
                "at": a.at,
                "ends_at": a.ends_at,
                "scope": service.scope_of(a),
                "text": a.text,
                "url": a.url,
                "created_by": a.created_by,
            }
            for a in found
        ],
        "total": total,
        "machines": machine_names(session),
        "may_annotate": may_annotate,
        "form": form or AnnotationForm(),
        "errors": errors or [],
        "done": DONE.get(done or ""),
    }
