"""The dashboard's pages.

Every page's state is in its URL (plain GET forms), so a link reproduces the view; plotly.js
is served from the installed ``plotly`` package (no CDN).
"""

import math
from dataclasses import replace
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Form, HTTPException, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response

from app.annotations import service as annotations_service
from app.anomalies.registry import read_thresholds
from app.api.deps import SessionDep
from app.audit import service as audit
from app.core import queue
from app.core.bounds import INT32_MAX, RowId
from app.core.errors import NotFound
from app.core.names import is_project_name
from app.corrections import service as corrections
from app.dashboard import access, annotations_page
from app.dashboard import subscriptions as subs
from app.dashboard.alerts import AlertQuery, inbox
from app.dashboard.compare import KINDS, CompareQuery, compare_page, csv_page
from app.dashboard.overview import FAMILIES, overview
from app.dashboard.run_page import MAX_PAGE_SIZE, PAGE_SIZE, run_page
from app.dashboard.series import GROUPINGS, SeriesQuery, series_page
from app.dashboard.shell import FRONTEND as FRONTEND  # app.main serves frontend/static from it
from app.dashboard.shell import (
    PLOTLY_JS,
    OpenFormRoute,
    PageProject,
    as_int,
    page_router,
    render,
)
from app.dashboard.sign_in import (
    forget,
    from_this_site,
    remember,
    safe_next,
    sign_in_failures,
    sign_in_url,
)
from app.dashboard.verdicts_page import verdicts_page
from app.notifications import outbox, silences
from app.notifications import service as notifications_service
from app.suite_runs import service as suite_runs_service
from app.suite_runs.schemas import SuiteRunRead, shard_read
from app.tokens.auth import (
    MAX_SECRET_LENGTH,
    csrf_matches,
    live_token,
    request_pepper,
    session_secret,
    signed_in,
)
from app.tokens.service import close_session, open_session

SUITE_RUNS_SHOWN = 50
AUDIT_SHOWN = 200  # entries of the audit page, newest first
RUN_DONE = {
    "invalidated": "Invalidated: the run left history; what it caused was withdrawn.",
    "unconfirmed": "Not deleted: tick the box to delete the run.",
}


pages = page_router()
# Open to all: plotly.js and signing in.
assets = APIRouter(include_in_schema=False, route_class=OpenFormRoute)


@assets.get("/static/plotly.min.js")
def plotly_js() -> FileResponse:
    """The plotly.js bundle of the installed ``plotly`` package (works air-gapped)."""
    return FileResponse(
        PLOTLY_JS, media_type="text/javascript", headers={"Cache-Control": "max-age=86400"}
    )


@assets.get("/login", response_class=HTMLResponse, response_model=None)
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


@assets.post("/login", response_class=HTMLResponse, response_model=None)
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


@assets.post("/logout")
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


@pages.get("/", response_class=HTMLResponse)
def overview_page(
    request: Request,
    session: SessionDep,
    machine: str | None = None,
    channel: str | None = None,
    mode: str = "inference",
    base: str | None = None,
    project: PageProject = None,
) -> HTMLResponse:
    """Per machine and channel: the dashboard's aggregates, base run vs latest run."""
    mode = mode if mode in ("inference", "training") else "inference"
    context = overview(session, machine, channel, mode, as_int(base), project)
    return render(request, session, "overview.html", families=FAMILIES, **context)


@pages.get("/series", response_class=HTMLResponse)
def series_view(
    request: Request,
    session: SessionDep,
    query: Annotated[SeriesQuery, Depends()],
) -> HTMLResponse:
    """One benchmark's metric over time, a line per config, precision or channel."""
    if query.by not in GROUPINGS:
        query = replace(query, by="config")
    if query.project is not None and not is_project_name(query.project):
        query = replace(query, project=None)
    return render(request, session, "series.html", **series_page(session, query))


@pages.get("/alerts", response_class=HTMLResponse)
def alerts_view(
    request: Request,
    session: SessionDep,
    status: str = "new",
    machine: str | None = None,
    channel: str | None = None,
    direction: str | None = None,
    group: str | None = None,
    project: PageProject = None,
) -> HTMLResponse:
    """The triage inbox: alert groups with their steps, explanations and actions."""
    query = AlertQuery(
        status, machine or None, channel or None, direction or None, as_int(group), project
    )
    return render(request, session, "alerts.html", **inbox(session, query))


@pages.get("/runs/{run_id}", response_class=HTMLResponse)
def run_view(
    request: Request,
    session: SessionDep,
    run_id: int,
    done: str | None = None,
    page: Annotated[int, Query(ge=1, le=INT32_MAX)] = 1,
    size: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = PAGE_SIZE,
) -> HTMLResponse:
    """One run: metadata, environment, coverage, failures, hardware, kernels, benchmarks.

    Its results ``size`` a page (``page``, from 1): a run may hold 100,000 of them.
    """
    context = run_page(session, run_id, page, size)
    may_correct = access.may(request, session, "admin")
    said = RUN_DONE.get(done or "")
    return render(request, session, "run.html", may_correct=may_correct, done=said, **context)


@pages.get("/runs/{run_id}/verdicts", response_class=HTMLResponse)
def run_verdicts_view(request: Request, session: SessionDep, run_id: RowId) -> HTMLResponse:
    """A branch's run against the default branch: its verdicts, each change drawn on a chart."""
    thresholds = read_thresholds(request.app.state.settings.DETECTOR_THRESHOLDS)
    context = verdicts_page(session, run_id, thresholds)
    return render(request, session, "verdicts.html", **context)


@pages.get("/suite-runs", response_class=HTMLResponse)
def suite_runs_view(
    request: Request, session: SessionDep, machine: str | None = None
) -> HTMLResponse:
    """Suite runs in flight (queued, running) first, then the newest; shards, why one failed."""
    in_flight = [
        suite_run
        for status in ("queued", "running")
        for suite_run in suite_runs_service.list_suite_runs(
            session, machine or None, status, 0, SUITE_RUNS_SHOWN
        )[0]
    ]
    recent, _ = suite_runs_service.list_suite_runs(
        session, machine or None, None, 0, SUITE_RUNS_SHOWN
    )
    flying = {s.id for s in in_flight}
    found = sorted(in_flight, key=lambda s: -s.id) + [s for s in recent if s.id not in flying]
    output = signed_in(request, session) is not None  # a process's output may print a secret
    suite_runs = [
        {
            **SuiteRunRead.of(s, output).model_dump(),
            "shards": [shard_read(shard, output) for shard in s.shards],
        }
        for s in found
    ]
    return render(
        request,
        session,
        "suite_runs.html",
        suite_runs=suite_runs,
        in_flight=len(in_flight),
        machine=machine,
    )


@pages.get("/compare", response_class=HTMLResponse, response_model=None)
def compare_view(
    request: Request,
    session: SessionDep,
    kind: str = "configs",
    machine: str | None = None,
    channel: str | None = None,
    metric: str = "latency",
    mode: str = "inference",
    base_config: str = "default",
    new_config: str = "dynamic",
    base_run: str | None = None,
    new_run: str | None = None,
    base_machine: str | None = None,
    new_machine: str | None = None,
    channels: str = "",
    format: str = "html",
    project: PageProject = None,
) -> Response:
    """Config vs config, run vs run, machine vs machine, or release lines side by side."""
    query = CompareQuery(
        kind if kind in KINDS else "configs",
        machine or None,
        channel or None,
        metric,
        mode,
        base_config,
        new_config,
        as_int(base_run),
        as_int(new_run),
        base_machine or None,
        new_machine or None,
        channels,
        project,
    )
    if format == "csv":
        return Response(
            csv_page(session, query),
            media_type="text/csv",
            headers={"Content-Disposition": f'attachment; filename="compare-{query.kind}.csv"'},
        )
    return render(request, session, "compare.html", **compare_page(session, query))


@pages.get("/subscriptions", response_class=HTMLResponse)
def subscriptions_view(
    request: Request, session: SessionDep, actor: access.AdminPage, done: str | None = None
) -> HTMLResponse:
    """Subscriptions (scope ``admin``): who is told of which findings, where and when."""
    context = subs.list_context(session, actor.token, done=done)
    return render(request, session, "subscriptions.html", **context)


@pages.post("/subscriptions", response_class=HTMLResponse, response_model=None)
def create_subscription_form(
    request: Request, session: SessionDep, actor: access.AdminForm, form: subs.SubscriptionFields
) -> Response:
    """Create a subscription from the page's form; refused, the form again with why.

    Made, its page is the answer (not a redirect to it): the one page that shows the
    signing secrets and feed URL it was given in full (every later read masks them).
    """
    settings = request.app.state.settings
    created, errors = subs.save_subscription(
        session, form, settings, None, actor.label, actor.token
    )
    if created is None:
        context = subs.list_context(session, actor.token, form, errors)
        # 200, not 422, as /login does: the form again, with why (a browser logs a 4xx)
        return render(request, session, "subscriptions.html", **context)
    queue.commit(session)
    shown = {"done": "created"}
    context = subs.detail_context(
        session, created.id, settings, actor.token, shown=shown, before=[]
    )
    return render(request, session, "subscription.html", **context)


@pages.get("/subscriptions/{subscription_id}", response_class=HTMLResponse)
def subscription_view(
    request: Request,
    session: SessionDep,
    actor: access.AdminPage,
    subscription_id: RowId,
    notice: str | None = None,
    delivery: str | None = None,
    done: str | None = None,
    follow: str | None = None,
) -> HTMLResponse:
    """One subscription: its secrets, its form, "send a test notice", its delivery log."""
    shown = {
        "notice": as_int(notice),
        "delivery": as_int(delivery),
        "done": done,
        "follow": as_int(follow),
    }
    settings = request.app.state.settings
    context = subs.detail_context(session, subscription_id, settings, actor.token, shown=shown)
    return render(request, session, "subscription.html", **context)


@pages.post("/subscriptions/{subscription_id}", response_class=HTMLResponse, response_model=None)
def update_subscription_form(
    request: Request,
    session: SessionDep,
    actor: access.AdminForm,
    subscription_id: RowId,
    form: subs.SubscriptionFields,
) -> Response:
    """Change a subscription from its form (its revision grows if anything changed)."""
    settings = request.app.state.settings
    saved, errors = subs.save_subscription(
        session, form, settings, subscription_id, actor.label, actor.token
    )
    if saved is None:
        context = subs.detail_context(session, subscription_id, settings, actor.token, form, errors)
        return render(request, session, "subscription.html", **context)
    queue.commit(session)
    return RedirectResponse(f"/subscriptions/{subscription_id}?done=saved", status_code=303)


@pages.post("/subscriptions/{subscription_id}/pause")
def pause_subscription_form(
    request: Request,
    session: SessionDep,
    actor: access.AdminForm,
    subscription_id: RowId,
    paused: Annotated[bool, Form()],
) -> RedirectResponse:
    """Pause or resume a subscription."""
    check = subs.receiver_check(request.app.state.settings)
    notifications_service.update_subscription(
        session, subscription_id, {"paused": paused}, check, by=actor.label, token=actor.token
    )
    queue.commit(session)
    done = "paused" if paused else "resumed"
    return RedirectResponse(f"/subscriptions/{subscription_id}?done={done}", status_code=303)


@pages.post(
    "/subscriptions/{subscription_id}/delete", response_class=HTMLResponse, response_model=None
)
def delete_subscription_form(
    request: Request,
    session: SessionDep,
    actor: access.AdminForm,
    subscription_id: RowId,
    confirm: Annotated[str, Form(max_length=10)] = "",
) -> Response:
    """Delete a subscription and its delivery log, once the box saying so is ticked."""
    if confirm != "yes":
        errors = [{"top": "delete", "loc": "confirm", "message": "tick the box to delete"}]
        settings = request.app.state.settings
        context = subs.detail_context(
            session, subscription_id, settings, actor.token, errors=errors
        )
        return render(request, session, "subscription.html", **context)
    notifications_service.delete_subscription(
        session, subscription_id, by=actor.label, token=actor.token
    )
    queue.commit(session)
    return RedirectResponse("/subscriptions?done=deleted", status_code=303)


@pages.post("/subscriptions/{subscription_id}/test")
def send_test_notice_form(
    request: Request, session: SessionDep, actor: access.AdminForm, subscription_id: RowId
) -> RedirectResponse:
    """Send a made-up notice to every receiver now; the page then follows its deliveries."""
    settings = request.app.state.settings
    notifications_service.get_subscription(session, subscription_id, actor.token)
    notice = outbox.send_test_notice(session, subscription_id, settings.PUBLIC_URL)
    queue.commit(session)
    to = f"/subscriptions/{subscription_id}?notice={notice.id}&done=test#notice-{notice.id}"
    return RedirectResponse(to, status_code=303)


@pages.post("/subscriptions/{subscription_id}/deliveries/{delivery_id}/redeliver")
def redeliver_form(
    session: SessionDep, actor: access.AdminForm, subscription_id: RowId, delivery_id: RowId
) -> RedirectResponse:
    """Send a delivery again now (the same notice, the same webhook-id)."""
    found = notifications_service.subscription_of_delivery(session, delivery_id, actor.token)
    if found != subscription_id:
        raise NotFound(f"subscription {subscription_id} has no delivery {delivery_id}")
    outbox.redeliver(session, delivery_id)
    queue.commit(session)
    to = f"/subscriptions/{subscription_id}?delivery={delivery_id}&done=redelivered"
    return RedirectResponse(f"{to}#delivery-{delivery_id}", status_code=303)


@pages.get("/silences", response_class=HTMLResponse)
def silences_view(request: Request, session: SessionDep, done: str | None = None) -> HTMLResponse:
    """Silences in force or to come, and those that ended last; triage adds and ends them."""
    may_silence = access.may(request, session, "triage")
    context = subs.silences_context(session, may_silence, "/silences")
    return render(request, session, "silences.html", done=subs.DONE.get(done or ""), **context)


@pages.post("/silences", response_class=HTMLResponse, response_model=None)
def create_silence_form(
    request: Request,
    session: SessionDep,
    actor: access.TriageForm,
    form: subs.SilenceFields,
    back: Annotated[str, Form(max_length=200)] = "/silences",
) -> Response:
    """Hold back notices of the findings the matchers select, for the hours given."""
    silence, errors = subs.parse_silence(form)
    if silence is None:
        context = subs.silences_context(session, True, safe_next(back), form, errors)
        return render(request, session, "silences.html", **context)
    matchers = silences.scoped(
        actor.token, silence.matchers.model_dump(mode="json", exclude_none=True), "project"
    )
    silences.create_silence(session, matchers, None, silence.ends_at, silence.comment, actor.label)
    queue.commit(session)
    return RedirectResponse(subs.with_done(safe_next(back), "silenced"), status_code=303)


@pages.post("/silences/{silence_id}/expire")
def expire_silence_form(
    session: SessionDep,
    actor: access.TriageForm,
    silence_id: RowId,
    back: Annotated[str, Form(max_length=200)] = "/silences",
) -> RedirectResponse:
    """End a silence now (it stays listed, expired)."""
    silences.expire_silence(session, silence_id, by=actor.label, token=actor.token)
    queue.commit(session)
    return RedirectResponse(subs.with_done(safe_next(back), "expired"), status_code=303)


@pages.get("/annotations", response_class=HTMLResponse)
def annotations_view(
    request: Request, session: SessionDep, done: str | None = None
) -> HTMLResponse:
    """The newest annotations; triage adds and deletes them."""
    may_annotate = access.may(request, session, "triage")
    context = annotations_page.page_context(session, may_annotate, done=done)
    return render(request, session, "annotations.html", **context)


@pages.post("/annotations", response_class=HTMLResponse, response_model=None)
def create_annotation_form(
    request: Request,
    session: SessionDep,
    actor: access.TriageForm,
    form: Annotated[annotations_page.AnnotationForm, Depends(annotations_page.annotation_form)],
) -> Response:
    """Add an annotation from the page's form; refused, the form again with why."""
    body, errors = annotations_page.parse_annotation(form)
    if body is None:
        context = annotations_page.page_context(session, True, form, errors)
        return render(request, session, "annotations.html", **context)
    annotations_service.create_annotation(
        session,
        body.at,
        body.ends_at,
        body.machine,
        body.channel,
        body.text,
        body.url,
        actor.label,
        # The form names no project: a project-limited token's annotation is its project's.
        project=actor.token.project,
        token=actor.token,
    )
    queue.commit(session)
    return RedirectResponse("/annotations?done=added", status_code=303)


@pages.post("/annotations/{annotation_id}/delete")
def delete_annotation_form(
    session: SessionDep, actor: access.TriageForm, annotation_id: RowId
) -> RedirectResponse:
    """Delete an annotation."""
    annotations_service.delete_annotation(session, annotation_id, by=actor.label, token=actor.token)
    queue.commit(session)
    return RedirectResponse("/annotations?done=deleted", status_code=303)


@pages.post("/runs/{run_id}/invalidate")
def invalidate_run_form(
    request: Request,
    session: SessionDep,
    actor: access.AdminForm,
    run_id: RowId,
    reason: Annotated[str, Form(min_length=1, max_length=corrections.MAX_REASON)],
) -> RedirectResponse:
    """Take the run out of history (admin): its findings withdrawn, detection judged again."""
    corrections.check_project(session, actor.token, run_id, "path.run_id")
    thresholds = dict(request.app.state.settings.DETECTOR_THRESHOLDS or {})
    corrections.invalidate(session, run_id, reason, actor.label, thresholds)
    queue.commit(session)
    return RedirectResponse(f"/runs/{run_id}?done=invalidated", status_code=303)


@pages.post("/runs/{run_id}/delete")
def delete_run_form(
    request: Request,
    session: SessionDep,
    actor: access.AdminForm,
    run_id: RowId,
    reason: Annotated[str, Form(min_length=1, max_length=corrections.MAX_REASON)],
    confirm: Annotated[str, Form(max_length=10)] = "",
) -> RedirectResponse:
    """Delete the run and its rows (admin), once the box saying so is ticked."""
    if confirm != "yes":
        return RedirectResponse(f"/runs/{run_id}?done=unconfirmed", status_code=303)
    corrections.check_project(session, actor.token, run_id, "path.run_id")
    thresholds = dict(request.app.state.settings.DETECTOR_THRESHOLDS or {})
    corrections.delete_run(session, run_id, reason, actor.label, thresholds)
    queue.commit(session)
    return RedirectResponse(f"/audit?target=run:{run_id}", status_code=303)


@pages.get("/audit", response_class=HTMLResponse)
def audit_view(
    request: Request,
    session: SessionDep,
    actor: access.AdminPage,
    action: Annotated[str | None, Query(max_length=64)] = None,
    target: Annotated[str | None, Query(max_length=128)] = None,
    by: Annotated[str | None, Query(max_length=200)] = None,
    before: Annotated[int | None, Query(ge=1, le=INT32_MAX)] = None,
) -> HTMLResponse:
    """The audit log (admin): every write that is not an upload, newest first."""
    entries = audit.list_entries(
        session,
        action=action or None,
        target=target or None,
        actor=by or None,
        before_id=before,
        limit=AUDIT_SHOWN + 1,
    )
    more = len(entries) > AUDIT_SHOWN
    entries = entries[:AUDIT_SHOWN]
    query = {"action": action or "", "target": target or "", "by": by or ""}
    older = None
    if more:
        older = "/audit?" + urlencode({**query, "before": entries[-1].id})
    return render(request, session, "audit.html", entries=entries, query=query, older=older)
