"""Suite runs in flight and done: their progress per shard, and why one failed; triggers."""

import logging
from datetime import timedelta
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request, Response

from app.api.deps import ReadAccess, SessionDep, TriggerToken
from app.api.responses import READS, WRITES, errors
from app.api.validation import ApiRoute
from app.core import queue
from app.core.bounds import RowId
from app.core.command_suites import command_tier
from app.core.config import Settings
from app.core.errors import DomainError, ErrorBody, InvalidInput
from app.core.names import DEFAULT_PROJECT
from app.core.pagination import Page, PageParams
from app.jobs import START_SUITE
from app.runs.reads import get_run
from app.suite_runs import compare_reruns, service, triggers
from app.suite_runs.models import SuiteRun
from app.suite_runs.schemas import (
    CompareRerun,
    SuiteRunDetail,
    SuiteRunRead,
    SuiteRunTrigger,
    shard_read,
)
from app.tokens import service as tokens_service
from app.tokens.auth import Credentials, identified

log = logging.getLogger(__name__)
MAX_TIER_LENGTH = 32  # SuiteRun.tier
router = APIRouter(tags=["suite runs"], route_class=ApiRoute)
TRIGGER_ANSWERS: dict[int | str, dict[str, Any]] = {
    200: {"description": "A retry: the suite run triggered earlier under this key"},
    **errors(409),
    429: {
        "model": ErrorBody,
        "description": "Too many triggered suite runs still queued or running on the machine "
        "or of the token",
    },
    503: {
        "model": ErrorBody,
        "description": "No broker (BENCHWATCH_BROKER_URL), or it did not take the task: "
        "nothing was queued",
    },
}


@router.post(
    "/suite-runs",
    status_code=202,
    response_model=SuiteRunDetail,
    responses={**WRITES, **TRIGGER_ANSWERS},
)
def trigger_suite_run(
    body: SuiteRunTrigger,
    session: SessionDep,
    token: TriggerToken,
    request: Request,
    response: Response,
) -> SuiteRunDetail:
    """Start a tier on a machine now, for a commit and a channel (scope `trigger`).

    The suite run is stored queued (`GET /suite-runs/{id}` shows it at once) and the machine's
    benchmark worker (`benchwatch worker --machine <machine>`) is told after the commit; it plans
    the shards and runs them. `machine` names one machine (pools are not yet triggerable).
    `command` names a command suite of `BENCHWATCH_COMMAND_SUITES` instead of a tier. With
    `key`, a retry answers the stored suite run (200); the same key with another body, 409.
    At most a few triggered suite runs may be queued or running per machine and per token: 429.
    One no worker adopted within `BENCHWATCH_TRIGGER_EXPIRE_S` is `expired` and counts no more.
    The run is stored under `project` (default: the token's project, else `default`); a
    project-limited token naming another project: 403 at `body.project`.
    """
    settings: Settings = request.app.state.settings
    tokens_service.check_machine(token, body.machine)
    project = body.project or token.project or DEFAULT_PROJECT
    tokens_service.check_project(token, project, "body.project")
    tier = body.tier or _command_tier(settings, body.command or "")
    if not settings.BROKER_URL:
        raise NoBroker("no broker (BENCHWATCH_BROKER_URL): benchmark workers take triggers there")
    # The default project is left out of the request, as triggers stored before it had it.
    asked = body.model_dump(exclude={"key", "command", "project"}) | {"tier": tier}
    if project != DEFAULT_PROJECT:
        asked["project"] = project
    suite_run, new = triggers.trigger_suite_run(
        session,
        token_id=token.id,
        key=body.key,
        request=asked,
        expire_after=timedelta(seconds=settings.TRIGGER_EXPIRE_S),
    )
    queue.commit(session)
    if new:  # after the commit: the worker finds the row it is told of
        kwargs = {k: asked[k] for k in ("machine", "tier", "channel", "trigger", "models")}
        publisher: queue.Publisher = request.app.state.publisher
        try:
            publisher.publish(START_SUITE, {"suite_run_id": suite_run.id, **kwargs})
        except Exception as exc:  # no worker will hear of it: withdrawn, so a retry can queue it
            log.exception("could not publish the start of suite run %s", suite_run.id)
            triggers.withdraw(session, suite_run.id)
            queue.commit(session)
            raise NoBroker(
                f"the broker did not take the trigger ({type(exc).__name__}): "
                "nothing was queued; try again"
            ) from exc
    response.status_code = 202 if new else 200
    response.headers["Location"] = str(request.url_for("get_suite_run", suite_run_id=suite_run.id))
    return _detail(suite_run, output=True)


def _command_tier(settings: Settings, name: str) -> str:
    """The suite run tier of command suite ``name`` (``command:<name>``); 422 if unknown."""
    tier = command_tier(name)
    if name not in settings.COMMAND_SUITES or len(tier) > MAX_TIER_LENGTH:
        known = sorted(settings.COMMAND_SUITES)
        message = f"unknown command suite {name!r}; known (BENCHWATCH_COMMAND_SUITES): {known}"
        raise InvalidInput(message, errors=[{"loc": "body.command", "message": message}])
    return tier


class NoBroker(DomainError):
    """Triggers need a broker: without one no benchmark worker runs."""

    status_code = 503


@router.get(
    "/suite-runs", response_model=Page[SuiteRunRead], dependencies=[ReadAccess], responses=READS
)
def list_suite_runs(
    session: SessionDep,
    request: Request,
    credentials: Credentials,
    paging: Annotated[PageParams, Depends()],
    machine: Annotated[str | None, Query(max_length=128)] = None,
    status: Literal["queued", "running", "finished", "failed", "expired"] | None = None,
) -> Page[SuiteRunRead]:
    """Suite runs, newest first; filter by machine and status.

    A failed process's output (the end of a reason) is answered to a token or sign-in only.
    """
    items, total = service.list_suite_runs(session, machine, status, paging.offset, paging.limit)
    output = identified(request, session, credentials)
    return paging.of([SuiteRunRead.of(s, output) for s in items], total)


@router.post(
    "/compare-reruns",
    status_code=202,
    response_model=SuiteRunDetail,
    responses={**WRITES, **errors(404, 422)},
)
def rerun_compared_cases(
    body: CompareRerun, session: SessionDep, token: TriggerToken, response: Response
) -> SuiteRunDetail:
    """Measure cases of a run again, to decide a comparison (scope `trigger`).

    For the cases a comparison says "needs more runs" (`GET /compare?stats=true`): the run's
    machine measures them again in the run's stack (not at all once its stack has changed),
    and `stats=true` folds the samples in beside the run's own; they never enter its series.
    The run must be a benchwatch worker's. While one re-run of the run is unfinished, asking
    again answers it (200).
    """
    run = get_run(session, body.run_id)
    tokens_service.check_machine(token, run.machine.name)
    tokens_service.check_project(token, run.project, "body.run_id")
    cases = [case.model_dump() for case in body.cases]
    before = {s.id for s in compare_reruns.of_run(session, run.id)}
    suite_run = compare_reruns.request(session, run, cases, token.name)
    queue.commit(session)
    response.status_code = 200 if suite_run.id in before else 202
    return _detail(suite_run, output=True)


@router.get(
    "/suite-runs/{suite_run_id}",
    response_model=SuiteRunDetail,
    dependencies=[ReadAccess],
    responses={**READS, **errors(404)},
)
def get_suite_run(
    suite_run_id: RowId, session: SessionDep, request: Request, credentials: Credentials
) -> SuiteRunDetail:
    """One suite run with its progress and each shard's status, attempts, worker and reason.

    A failed command's or shard's output tail (it may print a secret) ends a reason for a
    token or sign-in only; an anonymous reader sees the reason up to it.
    """
    output = identified(request, session, credentials)
    return _detail(service.get_suite_run(session, suite_run_id), output)


def _detail(suite_run: SuiteRun, output: bool) -> SuiteRunDetail:
    shards = [shard_read(shard, output) for shard in suite_run.shards]
    return SuiteRunDetail(**SuiteRunRead.of(suite_run, output).model_dump(), shards=shards)
