"""Prometheus metrics: the process's registry, request latency by route, counting after commit.

Domains define their own counters next to the code that counts (``prometheus_client``'s
default registry collects them); this module knows no domain. What a process counts stays in
that process unless ``PROMETHEUS_MULTIPROC_DIR`` names a directory its processes share
(prometheus-client's multiprocess mode): then every process writes its values there, and
``render`` sums them, so one scrape of any server process answers for all (docs/metrics.md).
A process with no server (a Celery worker on another host) serves the same sum itself
(``share_with_children``, then ``serve``).

Request latency is labelled by the route's path template (``/api/v1/runs/{run_id}``), never the
raw path: a label per URL would let anyone grow the server's memory and the scraper's series
without bound.
"""

import os
import re
import tempfile
import time
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIServer

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Histogram,
    generate_latest,
    multiprocess,
    start_http_server,
    values,
)
from prometheus_client.registry import Collector
from sqlalchemy import event
from sqlalchemy.orm import Session
from starlette.types import ASGIApp, Message, Receive, Scope, Send

MULTIPROC_DIR = "PROMETHEUS_MULTIPROC_DIR"
UNMATCHED = "<unmatched>"  # no route: 404s, and bodies refused before routing
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# From a cached read (a few ms) to a large upload's parse and ingest (tens of seconds).
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_PENDING = "benchwatch.pending_metrics"
_CONVERTER = re.compile(r"\{(\w+):[^}]*\}")
_exporters: list[WSGIServer] = []  # the servers ``serve`` started in this process

HTTP_LATENCY = Histogram(
    "benchwatch_http_request_duration_seconds",
    "Time from a request's arrival to the end of its answer, by route template",
    ["method", "route", "status"],
    buckets=LATENCY_BUCKETS,
)


def route_template(scope: Scope) -> str:
    """The matched route's full path template, ``UNMATCHED`` when no route took the request.

    FastAPI routes of an included router keep their own path (``/runs/{run_id}``) in
    ``scope["route"]``; the path as matched, with the router's prefix, is in FastAPI's
    effective route context. Elsewhere (Starlette, a mount) the route's own template is whole.
    """
    fastapi = scope.get("fastapi")
    context = fastapi.get("effective_route_context") if isinstance(fastapi, dict) else None
    template = getattr(getattr(context, "starlette_route", None), "path_format", None)
    template = template or getattr(context, "path", None)
    template = template or getattr(scope.get("route"), "path_format", None)
    if not isinstance(template, str) or not template:
        return UNMATCHED
    return _CONVERTER.sub(r"{\1}", template)  # /{run_id:int} -> /{run_id}


class RequestMetrics:
    """ASGI middleware: each HTTP request's duration, by method, route template and status class.

    Outermost, so the time includes every other middleware (body limit, compression).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Time the request; the route is known once the router has matched it."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # an exception before the answer started is answered 500 upstream

        async def noting_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, noting_status)
        finally:
            method = scope.get("method", "")
            HTTP_LATENCY.labels(
                method=method if method in METHODS else "other",
                route=route_template(scope),
                status=f"{status // 100}xx",
            ).observe(time.perf_counter() - started)


def after_commit(session: Session, action: Callable[[], None]) -> None:
    """Run ``action`` (a count) once the session's outermost transaction commits.

    A rolled-back transaction counts nothing: uploads refused half-way are not "ingested".
    """
    session.info.setdefault(_PENDING, []).append(action)


@event.listens_for(Session, "after_commit")
def _count_committed(session: Session) -> None:
    if session.in_nested_transaction():  # a savepoint: the outer transaction may still fail
        return
    for action in session.info.pop(_PENDING, []):
        action()


@event.listens_for(Session, "after_soft_rollback")
def _forget_uncommitted(session: Session, previous_transaction: Any) -> None:
    if not previous_transaction.nested:  # a savepoint's rollback leaves the transaction's
        session.info.pop(_PENDING, None)


def multiprocess_mode() -> bool:
    """Whether this process writes its metrics to the shared directory (see the module doc)."""
    return bool(os.environ.get(MULTIPROC_DIR))


def share_with_children() -> str | None:
    """Turn multiprocess mode on for this process and the processes it forks from now on.

    ``PROMETHEUS_MULTIPROC_DIR`` when set (a directory shared with other processes, e.g. the
    server's); else a new private empty one, which this returns for the caller to remove at
    exit (None when the environment named one). Call it before the processes fork and before
    any metric holds a value: one created earlier keeps it in this process's memory only.

    Raises:
        ValueError: ``PROMETHEUS_MULTIPROC_DIR`` names no directory.
    """
    made = None
    if multiprocess_mode():
        named = os.environ[MULTIPROC_DIR]
        if not os.path.isdir(named):
            raise ValueError(f"{MULTIPROC_DIR}={named!r} is not a directory")
    else:
        made = tempfile.mkdtemp(prefix="benchwatch-metrics-")
        os.environ[MULTIPROC_DIR] = made
    # prometheus-client chooses how values are kept when it is imported (this module
    # imported it before the variable was set); metrics created from now on read this.
    values.ValueClass = values.get_value_class()  # type: ignore[no-untyped-call]
    return made


def collecting_registry() -> CollectorRegistry:
    """What a scrape reads: every process's files in multiprocess mode, else this process's."""
    if not multiprocess_mode():
        return REGISTRY
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    return registry


def serve(port: int, address: str) -> None:
    """Answer scrapes in the Prometheus text format at ``http://address:port/metrics``.

    A thread of this process serves ``collecting_registry``: in multiprocess mode, the sum
    of every process that shares the directory.

    Raises:
        OSError: the address cannot be bound (in use, not this host's).
    """
    server, _ = start_http_server(port, addr=address, registry=collecting_registry())
    _exporters.append(server)


def close_inherited() -> None:
    """In a forked child: close the listening sockets ``serve`` opened in its parent.

    The child never answers on them, and a child that outlived its parent would keep the
    port bound, so that the parent could not start again.
    """
    for server in _exporters:
        server.socket.close()
    _exporters.clear()


def process_exited(pid: int) -> None:
    """Forget the live gauges of a process that exited (multiprocess mode; else nothing)."""
    if multiprocess_mode():
        multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]


def render(scrape_time: Iterable[Collector] = ()) -> tuple[bytes, str]:
    """The text exposition of every metric, and its content type.

    ``scrape_time``: collectors read at each scrape (gauges of what is waiting), in this
    process only; they are not registered anywhere, so each app can bring its own.
    """
    output = generate_latest(collecting_registry())
    extra = CollectorRegistry(auto_describe=False)
    for collector in scrape_time:
        extra.register(collector)
    return output + generate_latest(extra), CONTENT_TYPE_LATEST
