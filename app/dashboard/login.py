"""The sign-in form and signing out (``/login``, ``/logout``): open to anyone.

What they follow (the cookie, the site check, the failures' limit) is ``app.dashboard.sign_in``.
"""

import math
from typing import Annotated

from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.api.deps import SessionDep
from app.dashboard.shell import OpenFormRoute, render
from app.dashboard.sign_in import (
    forget,
    from_this_site,
    remember,
    safe_next,
    sign_in_failures,
    sign_in_url,
)
from app.tokens.auth import (
    MAX_SECRET_LENGTH,
    csrf_matches,
    live_token,
    request_pepper,
    session_secret,
    signed_in,
)
from app.tokens.service import close_session, open_session

router = APIRouter(include_in_schema=False, route_class=OpenFormRoute)


@router.get("/login", response_class=HTMLResponse, response_model=None)
def sign_in_form(
    request: Request, session: SessionDep, next: str = "/", again: bool = False
) -> Response:
    """The sign-in form; a browser already signed in goes straight back to ``next``."""
    if signed_in(request, session) is not None:
        return RedirectResponse(safe_next(next), status_code=303)
    # Arrived from another site, a SameSite=Strict cookie was held back: look once more from
    # this site (the form's meta refresh) before asking for a token.
    cross_site = request.headers.get("sec-fetch-site") == "cross-site"
    retry = f"{sign_in_url(safe_next(next))}&again=1" if cross_site and not again else None
    return render(request, session, "login.html", next=safe_next(next), retry=retry)


@router.post("/login", response_class=HTMLResponse, response_model=None)
def sign_in(
    request: Request,
    session: SessionDep,
    token: Annotated[str, Form(max_length=MAX_SECRET_LENGTH)] = "",
    next: Annotated[str, Form(max_length=2_000)] = "/",
) -> Response:
    """Check the pasted token, open a sign-in session and go back to the page."""
    if not from_this_site(request):
        error = "Sign in from this server's own form: another site posted this one."
        return render(request, session, "login.html", status=403, next="/", error=error)
    failures, address = sign_in_failures(request)
    if failures is not None and (wait := failures.wait(address)) > 0:
        retry_after = max(1, math.ceil(wait))
        error = f"Too many failed sign-ins from {address}: try again in {retry_after} s."
        refused = render(request, session, "login.html", status=429, next="/", error=error)
        refused.headers["Retry-After"] = str(retry_after)
        return refused
    found = live_token(request, session, token.strip()) if token.strip() else None
    if found is None:
        if failures is not None:
            failures.take(address)
        # 200, not 401: the form again with what went wrong (a browser logs a 401 as an error)
        error = "That token is unknown or revoked: paste a live API token."
        return render(request, session, "login.html", next=safe_next(next), error=error)
    session_id = open_session(session, found, request_pepper(request))
    session.commit()
    back = RedirectResponse(safe_next(next), status_code=303)
    return remember(back, request, session_id)


@router.post("/logout")
def sign_out(
    request: Request, session: SessionDep, csrf: Annotated[str, Form(max_length=128)] = ""
) -> Response:
    """Close the sign-in session (the form carries the page's CSRF value) and drop the cookie."""
    secret = session_secret(request)
    if signed_in(request, session) is not None and secret is not None:
        if not csrf_matches(request, session, csrf):
            raise HTTPException(403, detail="sign out from a page of this server")
        close_session(session, secret, request_pepper(request))
        session.commit()
    return forget(RedirectResponse("/login?again=1", status_code=303), request)
