"""What every dashboard page is made in: the templates, a page's render, the error page.

A page's route (``PageRoute``) answers any ``DomainError`` with the error page; a form posted
to it needs a signed-in poster (``access.signed_in_poster``, before its body is read) and is
at most ``FORM_MAX_BYTES``. plotly.js is served from the installed ``plotly`` package (no CDN).
"""

from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlencode

import plotly
from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, Response
from fastapi.routing import APIRoute
from fastapi.templating import Jinja2Templates
from sqlalchemy.orm import Session
from starlette.types import Message

from app.api.validation import refuse_nul_in_query
from app.core.bounds import in_id_range
from app.core.errors import DomainError, NotFound
from app.core.names import is_project_name
from app.core.urls import safe_href
from app.dashboard import access
from app.dashboard import format as fmt
from app.dashboard.figures import embed
from app.dashboard.queries import has_demo_data
from app.dashboard.series import GROUPINGS, RANGES
from app.dashboard.sign_in import safe_next, sign_in_url
from app.runs.reads import list_projects
from app.tokens.auth import csrf_token, signed_in

FRONTEND = Path(__file__).resolve().parents[2] / "frontend"
PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
templates = Jinja2Templates(directory=FRONTEND / "templates")
templates.env.filters |= {
    "number": fmt.number,
    "percent": fmt.percent,
    "href": safe_href,
    "embed": embed,
}
# A dashboard form is a few fields (a subscription's receivers and matchers the largest): a
# body over this is no form of ours (413), whatever BENCHWATCH_MAX_BODY_BYTES lets the API take.
FORM_MAX_BYTES = 64 * 1024


class FormTooLarge(DomainError):
    """A dashboard form's body is over ``FORM_MAX_BYTES``."""

    status_code = 413


async def _bounded_form(request: Request) -> Request:
    """The request with its body read, at most ``FORM_MAX_BYTES`` of it (413 beyond).

    A declared length over the cap is refused unread; a streamed body as soon as it passes it.
    """
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > FORM_MAX_BYTES:
        raise FormTooLarge(f"a dashboard form is at most {FORM_MAX_BYTES} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > FORM_MAX_BYTES:
            raise FormTooLarge(f"a dashboard form is at most {FORM_MAX_BYTES} bytes")
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:  # the body once; then what the client does (a disconnect, at the end)
            return await request.receive()
        sent = True
        return {"type": "http.request", "body": bytes(body), "more_body": False}

    return Request(request.scope, replay)


class PageRoute(APIRoute):
    """A dashboard page: every ``DomainError`` it raises answers with the error page.

    A link to a run that is gone, too many channels, a NUL in the query: the page's status
    code, and a page saying why, handled here once for every page. A form posted to a page
    needs a signed-in poster (checked before its body is read) and is at most
    ``FORM_MAX_BYTES``.
    """

    signed_in_forms = True  # /login and /logout: anyone may post them (``OpenFormRoute``)

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        """FastAPI's handler, with domain errors rendered as a page, and forms bounded."""
        handler = super().get_route_handler()
        takes_form = "POST" in (self.methods or ())

        async def handle(request: Request) -> Response:
            try:
                if takes_form:
                    if self.signed_in_forms:
                        await access.signed_in_poster(request)
                    request = await _bounded_form(request)
                return await handler(request)
            except DomainError as error:
                return await run_in_threadpool(error_page, request, error)

        return handle


class OpenFormRoute(PageRoute):
    """A form anyone may post (signing in and out), bounded as the pages' forms are."""

    signed_in_forms = False


def page_router() -> APIRouter:
    """A router of pages: signed in where the server is private, the error page on errors.

    A NUL in the query is refused: Postgres cannot compare text with one (a 422, not a 500).
    """
    return APIRouter(
        include_in_schema=False,
        dependencies=[Depends(access.page_access), Depends(refuse_nul_in_query)],
        route_class=PageRoute,
    )


def as_int(value: str | None) -> int | None:
    """A query parameter as an int; a malformed one is ignored (the page uses its default)."""
    try:
        number = int(value) if value not in (None, "") else None
    except ValueError:
        return None
    return number if number is None or in_id_range(number) else None  # no row has another id


def page_project(request: Request) -> str | None:
    """The page's ``?project=``; a malformed one is ignored (every project is shown)."""
    project = request.query_params.get("project") or None
    return project if project is not None and is_project_name(project) else None


PageProject = Annotated[str | None, Depends(page_project)]


def projects_of(request: Request, session: Session) -> list[str]:
    """Every project with a run, read once per request (the nav's picker)."""
    if not hasattr(request.state, "projects"):
        request.state.projects = list_projects(session)
    found: list[str] = request.state.projects
    return found


def render(
    request: Request, session: Session, name: str, status: int = 200, **context: Any
) -> HTMLResponse:
    """A page, with what every page needs (is this demo data? who is signed in? projects?).

    The nav offers a project picker only where more than one project holds runs; a chosen
    project is carried by the nav's links (``in_project``) and the pages' (``and_project``).
    """
    demo = has_demo_data(session)
    project = page_project(request)
    here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    web_session = signed_in(request, session)
    common = {
        "demo": demo,
        "path": request.url.path,
        "groupings": GROUPINGS,
        "ranges": RANGES,
        "signed_in_as": web_session.token.name if web_session else None,
        "csrf": csrf_token(request, session),
        "sign_in": sign_in_url(safe_next(here)),
        "projects": projects_of(request, session),
        "project": project,
        "in_project": f"?{urlencode({'project': project})}" if project else "",
        "and_project": f"&{urlencode({'project': project})}" if project else "",
    }
    return templates.TemplateResponse(request, name, {**common, **context}, status_code=status)


def error_page(request: Request, error: DomainError) -> HTMLResponse:
    """A friendly page for a link to something that is not (or no longer) there, or invalid.

    The request's own session has closed with the error, so the page reads with a new one.
    """
    heading = "Nothing here" if isinstance(error, NotFound) else "This view cannot be shown"
    with request.app.state.database.sessionmaker() as session:
        page = render(
            request,
            session,
            "error.html",
            status=error.status_code,
            heading=heading,
            message=error.detail,
        )
    page.headers.update(error.headers)  # a busy server's Retry-After, as the API sends it
    return page
