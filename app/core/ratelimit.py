"""A per-client rate limit of anonymous reads: a token bucket per peer address, in memory.

Anyone may read (unless ``BENCHWATCH_PUBLIC_READ=false``), and a read may cost far more than
its request: each client address gets ``burst`` reads at once, refilled at ``rate`` a second;
past them it is answered 429 with ``Retry-After``. The address is the one the server hands
the app: uvicorn replaces the peer with ``X-Forwarded-For`` only for the proxies of
``--forwarded-allow-ips``, so a client cannot pick its own. A request that carries a live
token or sign-in session is not limited (``acts_for_someone`` says, asked only of requests
that carry credentials). At most ``max_clients`` buckets are kept, the least recently seen
dropped first: memory is bounded whatever the number of addresses.
"""

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from app.core.errors import error_body

READS = frozenset({"GET", "HEAD"})
EXEMPT = frozenset({"/healthz"})  # the liveness probe costs nothing and must always answer
MAX_CLIENTS = 10_000


class TokenBuckets:
    """A bucket of ``burst`` tokens per client, refilled at ``rate`` a second; thread-safe."""

    def __init__(self, rate: float, burst: int, max_clients: int = MAX_CLIENTS) -> None:
        self.rate = rate
        self.burst = burst
        self.max_clients = max_clients
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # tokens, when
        self._lock = threading.Lock()

    def take(self, client: str, now: float | None = None) -> float:
        """Take a token of ``client``'s: 0.0 if it had one, else the seconds until it has."""
        now = time.monotonic() if now is None else now
        with self._lock:
            tokens, then = self._buckets.pop(client, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - then) * self.rate)
            wait = 0.0 if tokens >= 1.0 else (1.0 - tokens) / self.rate
            self._buckets[client] = (tokens - 1.0 if wait == 0.0 else tokens, now)
            while len(self._buckets) > self.max_clients:
                self._buckets.popitem(last=False)  # the least recently seen
            return wait

    def wait(self, client: str, now: float | None = None) -> float:
        """The seconds until ``client`` has a token (0.0: it has one); takes none."""
        now = time.monotonic() if now is None else now
        with self._lock:
            tokens, then = self._buckets.get(client, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - then) * self.rate)
            return 0.0 if tokens >= 1.0 else (1.0 - tokens) / self.rate

    def __len__(self) -> int:
        return len(self._buckets)


class AnonymousRateLimit:
    """ASGI middleware: anonymous reads past their client's bucket get 429 + Retry-After."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        per_window: int,
        window_s: float,
        burst: int,
        acts_for_someone: Callable[[Request], Awaitable[bool]],
        max_clients: int = MAX_CLIENTS,
    ) -> None:
        self.app = app
        self.buckets = (
            TokenBuckets(per_window / window_s, max(1, burst), max_clients)
            if per_window > 0
            else None
        )
        self.acts_for_someone = acts_for_someone

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:  # noqa: D102
        if (
            self.buckets is None
            or scope["type"] != "http"
            or scope["method"] not in READS
            or scope["path"] in EXEMPT
        ):
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        address = client[0] if client else "unknown"
        request = Request(scope)
        carries = "authorization" in request.headers or "cookie" in request.headers
        if carries and await self.acts_for_someone(request):
            await self.app(scope, receive, send)
            return
        wait = self.buckets.take(address)
        if wait == 0.0:
            await self.app(scope, receive, send)
            return
        retry_after = max(1, math.ceil(wait))
        answer = JSONResponse(
            error_body(
                "TooManyRequests",
                f"too many anonymous reads from {address}: try again in {retry_after} s, or "
                "send a token (BENCHWATCH_ANON_RATE_LIMIT)",
            ),
            status_code=429,
            headers={"Retry-After": str(retry_after)},
        )
        await answer(scope, receive, send)


_MADE = threading.Lock()


def buckets_of(holder: object, name: str, per_window: int, window_s: float) -> TokenBuckets | None:
    """The buckets kept on ``holder`` (an app's state) under ``name``, made on first use.

    ``per_window`` 0: None (no limit). Every token of a bucket may be spent at once: a limit
    of failures, not a pace of reads.
    """
    if per_window <= 0:
        return None
    with _MADE:
        found = getattr(holder, name, None)
        if not isinstance(found, TokenBuckets):
            found = TokenBuckets(per_window / window_s, per_window)
            setattr(holder, name, found)
        return found
