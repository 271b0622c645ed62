"""Who may see the dashboard's pages and post their forms.

Pages are read as the API is (``may_read``): by anyone, unless the server is private; then a
browser without a live token is sent to sign in. A page or form that needs a scope holds it by
the API's own rule (``app.tokens.auth.holds``). A form is for a signed-in session only, and is
refused when another site posted it (``from_this_site``) or when it lacks the page's CSRF
value, which only this server's pages know.
"""

from collections.abc import Callable
from typing import Annotated

from fastapi import Depends, Form, Request
from fastapi.concurrency import run_in_threadpool
from sqlalchemy.orm import Session

from app.core.db import SessionDep
from app.core.errors import Forbidden
from app.dashboard.sign_in import SignInRequired, from_this_site
from app.tokens.auth import (
    Actor,
    Credentials,
    csrf_matches,
    holds,
    live_session,
    may_read,
    signed_in,
)


def page_access(request: Request, session: SessionDep, credentials: Credentials) -> None:
    """Dashboard pages: like API reads, but a browser without a token is sent to sign in."""
    if not may_read(request, session, credentials):
        raise SignInRequired(_wanted(request))


def _wanted(request: Request) -> str:
    query = f"?{request.url.query}" if request.url.query else ""
    return request.url.path + query


async def signed_in_poster(request: Request) -> None:
    """The 403 page for a form posted by another site or without a live sign-in session.

    Checked from the headers and the cookie alone, before the body is read: FastAPI reads and
    parses a route's form before its dependencies run (``form_actor`` checks again, with the
    form's CSRF value), so an anonymous client could otherwise make the server take in a body
    as large as ``BENCHWATCH_MAX_BODY_BYTES`` for a form it was always going to refuse.
    """
    if not from_this_site(request):
        raise Forbidden("Post this form from this server's own page: another site posted it.")

    def alive() -> bool:
        with request.app.state.database.sessionmaker() as session:
            return live_session(request, session) is not None

    if not await run_in_threadpool(alive):
        raise Forbidden("Sign in with a token first: nothing was changed.")


def may(request: Request, session: Session, scope: str) -> bool:
    """Whether the request's sign-in session holds ``scope`` (a page's offer of its forms)."""
    web_session = signed_in(request, session)
    return web_session is not None and holds(web_session.token, scope)


def _holding(actor: Actor, scope: str) -> Actor:
    if not holds(actor.token, scope):
        raise Forbidden(f"The token {actor.token.name!r} lacks the scope {scope!r}.")
    return actor


def page_actor(scope: str) -> Callable[..., Actor]:
    """Dependency factory: the signed-in session, holding ``scope``.

    Signed out, the browser goes to the sign-in form (which comes back here); signed in
    without the scope, the answer is the 403 page.
    """

    def dependency(request: Request, session: SessionDep) -> Actor:
        web_session = signed_in(request, session)
        if web_session is None:
            raise SignInRequired(_wanted(request))
        return _holding(Actor(web_session.token, web_session.id), scope)

    return dependency


def form_actor(scope: str) -> Callable[..., Actor]:
    """Dependency factory: who posted a page's form, holding ``scope``; the 403 page otherwise.

    Refused when another site posted it, when signed out, or when the form's ``csrf`` is not
    the value of the session's pages.
    """

    def dependency(
        request: Request, session: SessionDep, csrf: Annotated[str, Form(max_length=128)] = ""
    ) -> Actor:
        if not from_this_site(request):
            raise Forbidden("Post this form from this server's own page: another site posted it.")
        web_session = signed_in(request, session)
        if web_session is None:
            raise Forbidden(f"Sign in with a {scope} token first: nothing was changed.")
        if not csrf_matches(request, session, csrf):
            raise Forbidden("The form lacks this page's CSRF value: reload the page, try again.")
        return _holding(Actor(web_session.token, web_session.id), scope)

    return dependency


AdminPage = Annotated[Actor, Depends(page_actor("admin"))]
AdminForm = Annotated[Actor, Depends(form_actor("admin"))]
TriageForm = Annotated[Actor, Depends(form_actor("triage"))]
TriggerForm = Annotated[Actor, Depends(form_actor("trigger"))]
