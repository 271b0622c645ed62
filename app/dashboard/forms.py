"""What the pages' forms do (POST): each acts through a domain's service, then redirects.

A refused form comes back as its page, with the form as typed and why beside it. Who may post
which: ``app.dashboard.access``.
"""

from typing import Annotated, Literal
from urllib.parse import parse_qsl

from fastapi import Depends, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.annotations import service as annotations_service
from app.api.deps import SessionDep
from app.core import queue
from app.core.bounds import RowId
from app.core.errors import Conflict, DomainError, NotFound
from app.corrections import service as corrections
from app.dashboard import access, annotations_page, backtest_page, compare
from app.dashboard import subscriptions as subs
from app.dashboard.alerts import AlertQuery, inbox
from app.dashboard.shell import page_router, render
from app.dashboard.sign_in import safe_next
from app.localization import service as localization_service
from app.notifications import outbox, silences
from app.notifications import service as notifications_service
from app.runs.reads import get_run
from app.suite_runs import compare_reruns
from app.tokens import service as tokens_service

router = page_router()


@router.post("/subscriptions", response_class=HTMLResponse, response_model=None)
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


@router.post("/subscriptions/{subscription_id}", response_class=HTMLResponse, response_model=None)
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


@router.post("/subscriptions/{subscription_id}/pause")
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


@router.post(
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


@router.post("/subscriptions/{subscription_id}/test")
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


@router.post("/subscriptions/{subscription_id}/deliveries/{delivery_id}/redeliver")
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


@router.post("/silences", response_class=HTMLResponse, response_model=None)
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


@router.post("/silences/{silence_id}/expire")
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


@router.post("/backtest", response_class=HTMLResponse)
def run_backtest_form(
    request: Request,
    session: SessionDep,
    actor: access.TriageForm,
    form: Annotated[backtest_page.BacktestForm, Depends(backtest_page.backtest_form)],
) -> HTMLResponse:
    """Run the page's backtest and show its report (it reads, and changes nothing)."""
    configured = request.app.state.settings.DETECTOR_THRESHOLDS
    report, error = backtest_page.run(session, form, configured)
    context = backtest_page.page_context(session, True, form, report, error)
    return render(request, session, "backtest.html", **context)


@router.post("/annotations", response_class=HTMLResponse, response_model=None)
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


@router.post("/annotations/{annotation_id}/delete")
def delete_annotation_form(
    session: SessionDep, actor: access.TriageForm, annotation_id: RowId
) -> RedirectResponse:
    """Delete an annotation."""
    annotations_service.delete_annotation(session, annotation_id, by=actor.label, token=actor.token)
    queue.commit(session)
    return RedirectResponse("/annotations?done=deleted", status_code=303)


@router.post("/runs/{run_id}/invalidate")
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


@router.post("/runs/{run_id}/delete")
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


@router.post("/localizations", response_class=HTMLResponse, response_model=None)
def localize_form(
    request: Request,
    session: SessionDep,
    actor: access.TriageForm,
    kind: Annotated[Literal["regression", "failure", "aggregate"], Form()],
    finding: Annotated[RowId, Form()],
    group: Annotated[RowId, Form()],
) -> Response:
    """Localize a finding from its alert group's page; its page is the answer.

    Refused (its case no worker measures, its machine's budget spent): the group's page again,
    why beside the finding's button. ``group`` is the group whose page posted it.
    """
    settings = request.app.state.settings
    try:
        localization, new = localization_service.request_localization(
            session,
            kind,
            finding,
            started_by=actor.label,
            budget=settings.LOCALIZE_BUDGET,
            command_suites=settings.LOCALIZE_SUITES,
            token=actor.token,
        )
    except Conflict as refused:
        session.rollback()
        context = inbox(session, AlertQuery(group=group))
        error = {"kind": kind, "id": finding, "message": refused.detail}
        return render(
            request, session, "alerts.html", may_triage=True, localize_error=error, **context
        )
    queue.commit(session)
    done = "queued" if new else "unfinished"
    return RedirectResponse(f"/localizations/{localization.id}?done={done}", status_code=303)


@router.post("/compare/reruns", response_class=HTMLResponse, response_model=None)
def compare_rerun_form(
    request: Request,
    session: SessionDep,
    actor: access.TriggerForm,
    back: Annotated[str, Form(max_length=4000)],
) -> Response:
    """Measure again the cases a comparison could not decide (scope ``trigger``).

    ``back``: the compare page's query string. The cases are the page's own, worked out here
    again (``compare.undecided``), not taken from the form; its page, as worked out, is the
    answer, saying which runs' cases were queued and why any were not.
    """
    try:
        params = dict(parse_qsl(back.removeprefix("?"), max_num_fields=40))
    except ValueError:  # more fields than a compare page's URL has: not one of ours
        params = {}
    query = compare.query_of(params)
    context = compare.compare_page(session, query)
    said = []
    for run_id, cases in (context.get("undecided") or {}).get("runs", {}).items():
        try:
            run = get_run(session, run_id)
            tokens_service.check_project(actor.token, run.project, "form.back")
            suite_run = compare_reruns.request(session, run, cases, actor.label)
        except DomainError as refused:
            said.append({"run": run_id, "ok": False, "text": refused.detail})
            continue
        text = f"suite run {suite_run.id} ({suite_run.status}), {len(cases)} case(s)"
        said.append({"run": run_id, "ok": True, "text": text})
    queue.commit(session)  # the comparison is as it was: the re-runs have measured nothing yet
    return render(request, session, "compare.html", rerun_said=said, **context)
