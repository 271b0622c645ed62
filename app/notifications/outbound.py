"""Outgoing HTTP to receivers: the one path every notice takes, behind the SSRF guard.

A request passes ``app.notifications.guard`` (the URL, every address of its host) and then:

- connects to an address the guard checked, never looking the name up again (a DNS server
  that answers differently the second time gains nothing), while TLS still verifies the
  certificate against the host name;
- follows no redirect, reads at most ``max_response_bytes`` of the answer, and gives up after
  ``timeout_s`` in all (lookup, connect, send and read together);
- goes direct: proxy environment variables are ignored (a proxy would do its own lookup).

It is httpcore (httpx's transport) under a network backend that connects to the checked
addresses and holds every socket operation to the one deadline.
"""

import functools
import ssl
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpcore

from app.notifications.guard import (
    DNS_TIMEOUT_S,
    Address,
    AllowList,
    DeliveryError,
    Refused,
    check_addresses,
    one_line,
    parse_target,
    resolve,
)
from app.notifications.receivers import Outcome, SendContext

MAX_RESPONSE_BYTES = 64 * 1024
ERROR_CHARS = 200  # of a response body, quoted in an outcome's error


def _remaining(deadline: float, timeout: type[httpcore.TimeoutException]) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise timeout("timed out")
    return left


class _DeadlineStream(httpcore.NetworkStream):
    """A connection whose every read and write ends by the request's deadline."""

    def __init__(self, stream: httpcore.NetworkStream, deadline: float) -> None:
        self._stream = stream
        self._deadline = deadline

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _remaining(self._deadline, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _remaining(self._deadline, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        left = _remaining(self._deadline, httpcore.ConnectTimeout)
        tls = self._stream.start_tls(ssl_context, server_hostname, left)
        return _DeadlineStream(tls, self._deadline)

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _PinnedBackend(httpcore.NetworkBackend):
    """Connects to the checked addresses, whatever host name the request carries."""

    def __init__(self, addresses: list[Address], deadline: float) -> None:
        self._addresses = addresses
        self._deadline = deadline

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        errors = []
        for i, address in enumerate(self._addresses):
            # Each address gets its share of the time left, so a dead first one (an IPv6
            # address without a route) leaves time for the next.
            share = _remaining(self._deadline, httpcore.ConnectTimeout) / (len(self._addresses) - i)
            try:
                stream = httpcore.SyncBackend().connect_tcp(
                    str(address), port, share, socket_options=socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                errors.append(f"{address} port {port}: {str(exc) or type(exc).__name__}")
                continue
            return _DeadlineStream(stream, self._deadline)
        _remaining(self._deadline, httpcore.ConnectTimeout)
        raise httpcore.ConnectError("could not connect to " + "; ".join(errors))


@functools.cache
def _default_ssl_context() -> ssl.SSLContext:
    """The system's CAs and certifi's (httpx's default); built once, on first use."""
    return httpcore.default_ssl_context()


@dataclass(frozen=True)
class Response:
    """A receiver's answer.

    Attributes:
        status: the HTTP status.
        headers: lower-case names; repeated headers joined with ", ".
        body: at most ``max_response_bytes`` of it.
        latency_ms: from the start of the request (the DNS lookup) to the body read.
        truncated: the body was longer than the cap (the rest was not read).
    """

    status: int
    headers: Mapping[str, str]
    body: bytes
    latency_ms: float
    truncated: bool = False


def _read_capped(chunks: Iterator[bytes], cap: int) -> tuple[bytes, bool]:
    body = bytearray()
    for chunk in chunks:
        body += chunk[: cap - len(body)]
        if len(body) >= cap:
            return bytes(body), True
    return bytes(body), False


def _headers_of(raw: list[tuple[bytes, bytes]]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for name, value in raw:
        key, text = name.decode("latin-1").lower(), value.decode("latin-1")
        headers[key] = f"{headers[key]}, {text}" if key in headers else text
    return headers


def request(
    method: str,
    url: str,
    *,
    content: bytes = b"",
    headers: Mapping[str, str],
    allow: AllowList,
    timeout_s: float,
    max_response_bytes: int = MAX_RESPONSE_BYTES,
    ssl_context: ssl.SSLContext | None = None,
) -> Response:
    """Send one request to a receiver through the guard; a 3xx is returned, not followed.

    Args:
        method: GET, POST, PATCH, ...
        url: the receiver's URL.
        content: the body (sent with a Content-Length when there is one, or for POST/PUT/PATCH).
        headers: sent as given; ``Host`` is set from the URL, ``user-agent`` defaults to
            ``benchwatch``.
        allow: the operator's allow-list (``AllowList.parse(settings.RECEIVER_ALLOW)``).
        timeout_s: for the whole request: lookup, connect, TLS, send, and reading the answer.
        max_response_bytes: reading stops here; the body is cut to it.
        ssl_context: the CAs to trust (default: the system's and certifi's).

    Raises:
        Refused: the guard's refusal (scheme, credentials, an address not allowed).
        DeliveryError: no answer: the name does not resolve, connection refused, TLS, timeout.
    """
    started = time.monotonic()
    deadline = started + timeout_s
    target = parse_target(url)
    addresses = resolve(target.host, target.port, min(DNS_TIMEOUT_S, timeout_s))
    check_addresses(target.host, addresses, allow)
    sent = {k.lower(): v for k, v in headers.items()}
    sent["host"] = target.host_header
    sent.setdefault("user-agent", "benchwatch")
    sent.pop("content-length", None)  # httpcore counts the body (None: no header at all)
    body = content if content or method.upper() in ("POST", "PUT", "PATCH") else None
    pool = httpcore.ConnectionPool(
        ssl_context=(ssl_context or _default_ssl_context()) if target.scheme == "https" else None,
        network_backend=_PinnedBackend(addresses, deadline),
    )
    try:
        with (
            pool,
            pool.stream(
                method.upper(),
                httpcore.URL(
                    scheme=target.scheme, host=target.host, port=target.port, target=target.path
                ),
                headers=list(sent.items()),
                content=body,
                extensions={
                    "timeout": dict.fromkeys(("connect", "read", "write", "pool"), timeout_s)
                },
            ) as answer,
        ):
            answer_body, truncated = _read_capped(answer.iter_stream(), max_response_bytes)
    except httpcore.TimeoutException:
        raise DeliveryError(f"{target.host}: no answer within {timeout_s:g} s") from None
    except (httpcore.NetworkError, httpcore.ProtocolError, httpcore.UnsupportedProtocol) as exc:
        raise DeliveryError(f"{target.host}: {one_line(str(exc), 300)}") from None
    latency_ms = (time.monotonic() - started) * 1000
    return Response(answer.status, _headers_of(answer.headers), answer_body, latency_ms, truncated)


def post(
    url: str,
    *,
    content: bytes,
    headers: Mapping[str, str],
    allow: AllowList,
    timeout_s: float,
    max_response_bytes: int = MAX_RESPONSE_BYTES,
    ssl_context: ssl.SSLContext | None = None,
) -> Response:
    """POST ``content`` to a receiver (``request`` with the method set)."""
    return request(
        "POST",
        url,
        content=content,
        headers=headers,
        allow=allow,
        timeout_s=timeout_s,
        max_response_bytes=max_response_bytes,
        ssl_context=ssl_context,
    )


def outcome_of(response: Response) -> Outcome:
    """Judge an answer: 2xx delivered; 410 switches the receiver off; 408, 429, 5xx retry.

    Any other status is a failure not worth repeating (the receiver would answer the same);
    a 3xx is one too, since redirects are not followed (it could lead anywhere).
    """
    status = response.status
    if 200 <= status < 300:
        return Outcome(ok=True, status=status, latency_ms=response.latency_ms)
    if 300 <= status < 400:
        location = one_line(response.headers.get("location", "none"))
        error = f"HTTP {status}: redirects are not followed (Location: {location})"
    elif status == 410:
        error = "HTTP 410 Gone: the receiver asked not to be sent more notices; it is switched off"
    else:
        text = response.body[: ERROR_CHARS * 4].decode("utf-8", errors="replace")
        error = f"HTTP {status}: {one_line(text)}".rstrip(": ")
    return Outcome(
        ok=False,
        status=status,
        latency_ms=response.latency_ms,
        error=error,
        retry=status in (408, 429) or status >= 500,
        disable=status == 410,
        retry_after_s=retry_after(response.headers.get("retry-after")),
    )


def retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds a ``Retry-After`` header asks for: a number of seconds, or an HTTP date.

    None when absent or unreadable; never negative.
    """
    if not value:
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max((when - (now or datetime.now(UTC))).total_seconds(), 0.0)


def failed(exc: Refused | DeliveryError, started: float) -> Outcome:
    """The outcome of an attempt that got no answer; ``started`` is its ``time.monotonic()``.

    A ``DeliveryError`` (DNS, connection, TLS, timeout) is retried: it is often brief. A
    ``Refused`` is not: the URL or the operator's allow-list has to change first, and a
    redelivery after that change sends the notice.
    """
    return Outcome(
        ok=False,
        latency_ms=(time.monotonic() - started) * 1000,
        error=str(exc),
        retry=isinstance(exc, DeliveryError),
    )


def post_for_outcome(
    url: str, *, content: bytes, headers: Mapping[str, str], context: SendContext
) -> Outcome:
    """POST to a receiver with the operator's settings and judge the answer; never raises.

    A malformed ``receiver_allow`` fails the attempt with retry (the operator's to fix).
    """
    started = time.monotonic()
    try:
        allow = AllowList.parse(context.receiver_allow)
    except ValueError as exc:
        return Outcome(ok=False, error=str(exc), retry=True)
    try:
        response = post(
            url,
            content=content,
            headers=headers,
            allow=allow,
            timeout_s=context.timeout_s,
            max_response_bytes=context.max_response_bytes,
        )
    except (Refused, DeliveryError) as exc:
        return failed(exc, started)
    return outcome_of(response)
