"""create_app(): the FastAPI application with its routers, error handlers and limits."""

import gc
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from http import HTTPStatus

from fastapi import APIRouter, FastAPI, Request, Response
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.gzip import GZipMiddleware
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

import app.models  # noqa: F401  (every model registered before the first query)
from app.api.deps import ReadAccess
from app.api.validation import allowed_methods, handle_validation_error, nul_free_openapi
from app.core.config import DEV_PEPPER, Settings, settings
from app.core.db import UNAVAILABLE, Database, database_unavailable, request_session
from app.core.errors import DomainError, error_body, handle_domain_error
from app.core.headers import SecurityHeaders, docs_router
from app.core.limits import BodySizeLimit
from app.core.logging import configure_logging
from app.core.metrics import RequestMetrics, render
from app.core.queue import Publisher
from app.core.ratelimit import AnonymousRateLimit
from app.core.request_id import RequestId
from app.dashboard import router as dashboard
from app.dashboard.shell import FRONTEND
from app.dashboard.sign_in import SignInRequired, to_sign_in
from app.health.router import router as health_router
from app.notifications import config_file
from app.notifications.router import feeds as feeds_router
from app.notifications.service import check_receivers
from app.observability import WorkWaiting
from app.routes import api_router
from app.runs import branches
from app.runtime import check_settings, connect, disconnect, start_sweepers
from app.tokens.auth import check_caller

log = logging.getLogger(__name__)

DESCRIPTION = """
benchwatch stores PyTorch benchmark results per machine, environment and compiler config,
and serves their history, summaries and comparisons.

Writes need an API token (`benchwatch token create --name ci --scope ingest`), sent as
`Authorization: Bearer <token>`. Reads are public unless `BENCHWATCH_PUBLIC_READ=false`.
Errors are JSON: `{"error": <kind>, "detail": <sentence>, "errors": [{loc, field,
result_index, message}]}`.
"""


def tune_garbage_collector() -> None:
    """Fewer, cheaper collections in a serving process (bench/ingest.py measures the gain).

    Everything allocated during start-up lives as long as the process, so it is frozen out of
    the collector's scans; a 2,000-result upload allocates ~100k objects, so the youngest
    generation is collected every 50,000 allocations instead of every 700.
    """
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)


async def handle_http_error(request: Request, exc: Exception) -> Response:
    """Under ``/api/``, an unknown path or a wrong method answers in the API's error body too."""
    assert isinstance(exc, StarletteHTTPException)
    if not request.url.path.startswith("/api/"):
        return await http_exception_handler(request, exc)
    body = error_body(HTTPStatus(exc.status_code).phrase.replace(" ", ""), str(exc.detail))
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        headers["Allow"] = allowed_methods(request)
    return JSONResponse(body, status_code=exc.status_code, headers=headers)


def refuse_development_secrets(config: Settings) -> None:
    """A production configuration (Postgres or a broker) must set its own token pepper.

    With the public development value, anyone who reads a database dump can test guessed
    tokens against it offline; the embedded SQLite default stays usable as it is.
    """
    production = bool(config.BROKER_URL) or not config.DATABASE_URL.startswith("sqlite")
    if production and config.TOKEN_PEPPER.get_secret_value() == DEV_PEPPER:
        raise ValueError(
            "BENCHWATCH_TOKEN_PEPPER is the development value on a production configuration "
            "(Postgres or a broker): set it to a long random secret, e.g. `openssl rand -hex 32`"
        )


def metrics_router(database: Database, publisher: Publisher) -> APIRouter:
    """``GET /metrics``: the Prometheus text format, readable as the other reads are."""
    waiting = WorkWaiting(database, publisher)
    router = APIRouter(include_in_schema=False, dependencies=[ReadAccess])

    @router.get("/metrics")
    def metrics() -> Response:
        body, content_type = render([waiting])
        return Response(body, media_type=content_type, headers={"Cache-Control": "no-store"})

    return router


def caller_check(database: Database, config: Settings) -> Callable[[Request], Awaitable[bool]]:
    """Whether a request carries a live token or sign-in session (the rate limit's question).

    Its own session, closed before the request goes on: the route reads with its own.
    """

    def check(request: Request) -> bool:
        scheme, _, secret = request.headers.get("authorization", "").partition(" ")
        credentials = (
            HTTPAuthorizationCredentials(scheme=scheme, credentials=secret.strip())
            if scheme.lower() == "bearer" and secret.strip()
            else None
        )
        with request_session(database, config.STATEMENT_TIMEOUT_S) as session:
            try:
                check_caller(request, session, credentials)
            except StarletteHTTPException:
                return False
        return True

    async def acts_for_someone(request: Request) -> bool:
        return await run_in_threadpool(check, request)

    return acts_for_someone


def create_app(config: Settings | None = None) -> FastAPI:
    """The application for ``config`` (default: the environment's settings)."""
    config = config or settings
    configure_logging(config.LOG_LEVEL, config.LOG_FORMAT)
    refuse_development_secrets(config)
    check_settings(config)  # as the worker does
    branches.warn_if_guessed(config.DEFAULT_BRANCHES, config.RETAIN_BRANCH_RUNS_DAYS)
    database, publisher = connect(config)
    subscriptions_file = config.SUBSCRIPTIONS_FILE
    if subscriptions_file is not None:
        config_file.read(subscriptions_file)  # a bad file stops the server at start

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        tune_garbage_collector()
        if subscriptions_file is not None:
            targets = check_receivers(config.RECEIVER_ALLOW, config.APPRISE_SCHEMES)
            with database.session_scope() as session:
                config_file.load(session, subscriptions_file, targets)
        # With a broker, beat sweeps; in process, this server does (and first at start-up).
        sweepers = start_sweepers(config, publisher)
        yield
        for sweeper in sweepers:
            sweeper.stop()
        disconnect(database, publisher)  # queued in-process jobs finish first

    application = FastAPI(
        title="benchwatch",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # served by docs_router, under the page policy
        redoc_url=None,
    )
    application.state.settings = config
    application.state.database = database
    application.state.publisher = publisher
    application.add_middleware(BodySizeLimit, max_bytes=config.MAX_BODY_BYTES)
    # Inside the headers, metrics and request id: a 429 is logged, counted and marked as any.
    application.add_middleware(
        AnonymousRateLimit,
        per_window=config.ANON_RATE_LIMIT,
        window_s=config.ANON_RATE_WINDOW_S,
        burst=config.ANON_RATE_BURST,
        acts_for_someone=caller_check(database, config),
    )
    application.add_exception_handler(DomainError, handle_domain_error)
    application.add_exception_handler(RequestValidationError, handle_validation_error)
    application.add_exception_handler(SignInRequired, to_sign_in)
    application.add_exception_handler(StarletteHTTPException, handle_http_error)
    for unavailable in UNAVAILABLE:
        application.add_exception_handler(unavailable, database_unavailable)
    # zlib's default level: Starlette's 9 costs several times the CPU for an answer barely
    # smaller.
    application.add_middleware(GZipMiddleware, minimum_size=2048, compresslevel=6)
    application.add_middleware(SecurityHeaders)
    application.add_middleware(RequestMetrics)
    application.add_middleware(RequestId)  # outermost: every log line of the request has it
    application.include_router(health_router)
    if config.METRICS:
        application.include_router(metrics_router(database, publisher))
    application.include_router(docs_router(application))
    application.include_router(api_router)
    application.include_router(feeds_router)
    application.include_router(dashboard.assets)
    application.mount("/static", StaticFiles(directory=FRONTEND / "static"), name="static")
    application.include_router(dashboard.pages)
    application.openapi = nul_free_openapi(application)  # type: ignore[method-assign]
    return application
