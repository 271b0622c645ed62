"""The dashboard's pages (GET): each renders its page module's plain data.

Every page's state is in its URL (plain GET forms), so a link reproduces the view. Who may
see what: ``app.dashboard.access``; the forms the pages post: ``app.dashboard.forms``.
"""

from dataclasses import replace
from typing import Annotated
from urllib.parse import urlencode

from fastapi import Depends, Query, Request
from fastapi.responses import HTMLResponse, Response

from app.anomalies.deadlines import Deadlines
from app.anomalies.registry import read_thresholds
from app.api.deps import SessionDep
from app.audit import service as audit
from app.core.bounds import INT32_MAX, RowId
from app.core.names import is_project_name
from app.dashboard import access, annotations_page, backtest_page
from app.dashboard import subscriptions as subs
from app.dashboard.alerts import AlertQuery, inbox
from app.dashboard.compare import compare_page, csv_page, query_of
from app.dashboard.kernels_page import kernels_page, regression_kernels_page
from app.dashboard.localization_page import localization_page
from app.dashboard.overview import FAMILIES, overview
from app.dashboard.quality_page import quality_page
from app.dashboard.revision_page import revision_page
from app.dashboard.run_page import MAX_PAGE_SIZE, PAGE_SIZE, run_page
from app.dashboard.series import GROUPINGS, SeriesQuery, series_page
from app.dashboard.shell import PageProject, as_int, page_router, render
from app.dashboard.verdicts_page import verdicts_page
from app.localization import service as localizations
from app.quality.service import MAX_WEEKS
from app.suite_runs import service as suite_runs_service
from app.suite_runs.models import LOCALIZE_TRIGGER
from app.suite_runs.schemas import SuiteRunRead, shard_read
from app.tokens.auth import signed_in

SUITE_RUNS_SHOWN = 50
AUDIT_SHOWN = 200  # entries of the audit page, newest first
RUN_DONE = {
    "invalidated": "Invalidated: the run left history; what it caused was withdrawn.",
    "unconfirmed": "Not deleted: tick the box to delete the run.",
}
LOCALIZATION_DONE = {
    "queued": "Queued for the machine's worker.",
    "unfinished": "Not asked again: this finding's localization is already queued or running.",
}


router = page_router()


@router.get("/", response_class=HTMLResponse)
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


@router.get("/series", response_class=HTMLResponse)
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


@router.get("/alerts", response_class=HTMLResponse)
def alerts_view(
    request: Request,
    session: SessionDep,
    status: str = "new",
    machine: str | None = None,
    channel: str | None = None,
    direction: str | None = None,
    group: str | None = None,
    project: PageProject = None,
    overdue: str | None = None,
) -> HTMLResponse:
    """The triage inbox: alert groups with their steps, explanations and actions."""
    query = AlertQuery(
        status,
        machine or None,
        channel or None,
        direction or None,
        as_int(group),
        project,
        overdue=overdue in ("1", "true", "on"),
    )
    may_triage = access.may(request, session, "triage")
    context = inbox(session, query, Deadlines.of(request.app.state.settings))
    return render(request, session, "alerts.html", may_triage=may_triage, **context)


@router.get("/quality", response_class=HTMLResponse)
def quality_view(request: Request, session: SessionDep, weeks: str | None = None) -> HTMLResponse:
    """Alert quality: findings per week, time to triage and fix, invalid shares, outcomes."""
    rules = Deadlines.of(request.app.state.settings)
    back = as_int(weeks) or 12
    context = quality_page(session, min(max(back, 1), MAX_WEEKS), rules)
    return render(request, session, "quality.html", **context)


@router.get("/revisions/{revision}", response_class=HTMLResponse)
def revision_view(request: Request, session: SessionDep, revision: str) -> HTMLResponse:
    """Everything one commit or torch build moved, across machines, channels and projects."""
    rules = Deadlines.of(request.app.state.settings)
    may_triage = access.may(request, session, "triage")
    context = revision_page(session, revision, rules)
    return render(request, session, "revision.html", may_triage=may_triage, **context)


@router.get("/localizations/{localization_id}", response_class=HTMLResponse)
def localization_view(
    request: Request, session: SessionDep, localization_id: RowId, done: str | None = None
) -> HTMLResponse:
    """One localization: its state, culprit, costs, and each probe's samples on a chart."""
    context = localization_page(session, localization_id)
    said = LOCALIZATION_DONE.get(done or "")
    return render(request, session, "localization.html", done=said, **context)


@router.get("/kernels", response_class=HTMLResponse)
def kernels_view(
    request: Request,
    session: SessionDep,
    base_run: RowId,
    head_run: RowId,
    benchmark: RowId,
    head_benchmark: RowId | None = None,
) -> HTMLResponse:
    """One case's kernels from a base run to a head run, or against another config of it.

    Where the step is, what fused, what Inductor generated differently.
    """
    context = kernels_page(session, base_run, head_run, benchmark, head_benchmark)
    return render(request, session, "kernels.html", **context)


@router.get("/regressions/{regression_id}/kernels", response_class=HTMLResponse)
def regression_kernels_view(
    request: Request, session: SessionDep, regression_id: RowId
) -> HTMLResponse:
    """A regression's case, kernel by kernel, from its last good run to its first bad run."""
    context = regression_kernels_page(session, regression_id)
    return render(request, session, "kernels.html", **context)


@router.get("/runs/{run_id}", response_class=HTMLResponse)
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


@router.get("/runs/{run_id}/verdicts", response_class=HTMLResponse)
def run_verdicts_view(request: Request, session: SessionDep, run_id: RowId) -> HTMLResponse:
    """A branch's run against the default branch: its verdicts, each change drawn on a chart."""
    thresholds = read_thresholds(request.app.state.settings.DETECTOR_THRESHOLDS)
    context = verdicts_page(session, run_id, thresholds)
    return render(request, session, "verdicts.html", **context)


@router.get("/suite-runs", response_class=HTMLResponse)
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
    # A localization's suite run has no shards: its page says how far the search got.
    searches = localizations.of_suite_runs(
        session, [s.id for s in found if s.trigger == LOCALIZE_TRIGGER]
    )
    suite_runs = [
        {
            **SuiteRunRead.of(s, output).model_dump(),
            "shards": [shard_read(shard, output) for shard in s.shards],
            "localization": searches.get(s.id),
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


@router.get("/compare", response_class=HTMLResponse, response_model=None)
def compare_view(request: Request, session: SessionDep, format: str = "html") -> Response:
    """Config vs config, run vs run, machine vs machine, or release lines side by side.

    Its state is its URL's (``compare.query_of``): kind, machine, channel, metric, mode,
    base_config, new_config, base_run, new_run, base_machine, new_machine, channels, project.
    """
    query = query_of(request.query_params)
    if format == "csv":
        return Response(
            csv_page(session, query),
            media_type="text/csv",
            headers={"Content-Disposition": f'attachment; filename="compare-{query.kind}.csv"'},
        )
    return render(request, session, "compare.html", **compare_page(session, query))


@router.get("/subscriptions", response_class=HTMLResponse)
def subscriptions_view(
    request: Request, session: SessionDep, actor: access.AdminPage, done: str | None = None
) -> HTMLResponse:
    """Subscriptions (scope ``admin``): who is told of which findings, where and when."""
    context = subs.list_context(session, actor.token, done=done)
    return render(request, session, "subscriptions.html", **context)


@router.get("/subscriptions/{subscription_id}", response_class=HTMLResponse)
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


@router.get("/silences", response_class=HTMLResponse)
def silences_view(request: Request, session: SessionDep, done: str | None = None) -> HTMLResponse:
    """Silences in force or to come, and those that ended last; triage adds and ends them."""
    may_silence = access.may(request, session, "triage")
    context = subs.silences_context(session, may_silence, "/silences")
    return render(request, session, "silences.html", done=subs.DONE.get(done or ""), **context)


@router.get("/annotations", response_class=HTMLResponse)
def annotations_view(
    request: Request, session: SessionDep, done: str | None = None
) -> HTMLResponse:
    """The newest annotations; triage adds and deletes them."""
    may_annotate = access.may(request, session, "triage")
    context = annotations_page.page_context(session, may_annotate, done=done)
    return render(request, session, "annotations.html", **context)


@router.get("/backtest", response_class=HTMLResponse)
def backtest_view(request: Request, session: SessionDep) -> HTMLResponse:
    """The backtest form (triage runs it)."""
    context = backtest_page.page_context(session, access.may(request, session, "triage"))
    return render(request, session, "backtest.html", **context)


@router.get("/audit", response_class=HTMLResponse)
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
