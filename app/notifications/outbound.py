"""Outgoing HTTP to receivers: the one path every notice takes, behind the SSRF guard.

Whoever manages subscriptions chooses a receiver's URL, and the request leaves from a worker
inside the operator's network; unguarded, ``http://169.254.169.254/...`` or
``http://10.0.0.5:6379/`` would make benchwatch a proxy into that network. So a request:

- resolves the host name once (within ``DNS_TIMEOUT_S``) and is refused when any of its
  addresses is not public (``forbidden_kind``: loopback, private, link-local, metadata, ...)
  unless the operator allows it (``BENCHWATCH_RECEIVER_ALLOW``, ``AllowList``);
- connects to an address it checked, never looking the name up again (a DNS server that
  answers differently the second time gains nothing), while TLS still verifies the
  certificate against the host name;
- follows no redirect, reads at most ``max_response_bytes`` of the answer, and gives up after
  ``timeout_s`` in all (lookup, connect, send and read together);
- goes direct: proxy environment variables are ignored (a proxy would do its own lookup).

It is httpcore (httpx's transport) under a network backend that connects to the checked
addresses and holds every socket operation to the one deadline.
"""

import functools
import ipaddress
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import quote, urlsplit

import httpcore

from app.core.urls import is_http_url
from app.notifications.receivers import Outcome, SendContext

DNS_TIMEOUT_S = 3.0  # a lookup that takes longer fails (and counts against timeout_s)
MAX_RESPONSE_BYTES = 64 * 1024
ERROR_CHARS = 200  # of a response body, quoted in an outcome's error

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

# Cloud instance metadata (AWS, ECS, GCP, Azure, Oracle, Alibaba): credentials live there, so
# only an allow-list entry naming the address itself opens one (not a network, not a name).
METADATA = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",
        "169.254.170.2",
        "168.63.129.16",
        "192.0.0.192",
        "100.100.100.200",
        "fd00:ec2::254",
    )
)
_SHARED = ipaddress.ip_network("100.64.0.0/10")  # carrier-grade NAT (RFC 6598)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")  # DNS64 puts public IPv4 hosts here
# Special-purpose blocks that ipaddress (as of Python 3.11) still calls global.
_NOT_PUBLIC = tuple(
    ipaddress.ip_network(n)
    for n in ("192.0.0.0/24", "64:ff9b:1::/48", "fec0::/10", "2001::/23", "2001:db8::/32")
)
_LABEL = r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?"
_HOST_NAME = re.compile(rf"(?=.{{1,253}}$){_LABEL}(?:\.{_LABEL})*")


class Refused(ValueError):
    """The guard refused the URL; the message is a sentence its user can act on."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class DeliveryError(Exception):
    """The request got no answer (DNS, connection, TLS, timeout); the message is one line."""


def _host_name(text: str) -> str | None:
    """``text`` as an ASCII host name (lower case, IDNA), or None if it is not one."""
    name = text.strip().lower().rstrip(".")
    try:
        name = name.encode("idna").decode("ascii")
    except UnicodeError:
        return None
    return name if _HOST_NAME.fullmatch(name) else None


def _embedded(address: Address) -> tuple[ipaddress.IPv4Address, str] | None:
    """The IPv4 address an IPv6 one carries, and how (mapped, NAT64, 6to4, Teredo)."""
    if isinstance(address, ipaddress.IPv4Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped, "IPv4-mapped"
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF), "NAT64"
    if address.sixtofour is not None:
        return address.sixtofour, "6to4"
    if address.teredo is not None:
        return address.teredo[1], "Teredo"
    return None


def is_metadata(address: Address) -> bool:
    """Whether ``address`` is a cloud metadata service, directly or inside an IPv6 address."""
    inner = _embedded(address)
    return address in METADATA or (inner is not None and inner[0] in METADATA)


def forbidden_kind(address: Address) -> str | None:
    """What makes ``address`` off limits ("loopback", "private", ...), or None if it is public.

    An IPv6 address that carries an IPv4 one (mapped, NAT64, 6to4, Teredo) is judged by that
    IPv4 address; Teredo is refused whatever it carries.
    """
    if is_metadata(address):
        return "cloud metadata"
    inner = _embedded(address)
    if inner is not None:
        kind = forbidden_kind(inner[0])
        if kind is not None:
            return f"{kind} (as {inner[1]} IPv6)"
        if inner[1] != "Teredo":
            return None
    kinds = (
        ("loopback", address.is_loopback),
        ("unspecified", address.is_unspecified),
        ("link-local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("shared (carrier-grade NAT)", address in _SHARED),
        ("reserved", address.is_reserved),
        ("private", address.is_private),
        ("special-purpose", any(address in n for n in _NOT_PUBLIC)),
        ("site-local", isinstance(address, ipaddress.IPv6Address) and address.is_site_local),
        ("non-public", not address.is_global),
    )
    return next((kind for kind, applies in kinds if applies), None)


@dataclass(frozen=True)
class AllowList:
    """What the operator lets receivers reach although it is not public.

    ``networks``: addresses (as /32 or /128) and networks; ``hosts``: host names, lower case,
    whose addresses are all allowed (but a metadata address only through an entry that is
    that very address).
    """

    networks: tuple[Network, ...] = ()
    hosts: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, text: str) -> "AllowList":
        """Read ``BENCHWATCH_RECEIVER_ALLOW``: addresses, networks, host names, comma-separated.

        Raises:
            ValueError: an entry is none of these (the message names it).
        """
        networks: list[Network] = []
        hosts: set[str] = set()
        for raw in text.split(","):
            entry = raw.strip()
            if not entry:
                continue
            try:
                networks.append(ipaddress.ip_network(entry.removeprefix("[").removesuffix("]")))
                continue
            except ValueError as exc:
                if re.fullmatch(r"[0-9a-fA-F:.\[\]]+/\d+", entry):
                    raise ValueError(
                        f"BENCHWATCH_RECEIVER_ALLOW: {entry!r} is not a network ({exc})"
                    ) from None
            if (host := _host_name(entry)) is None:
                raise ValueError(
                    f"BENCHWATCH_RECEIVER_ALLOW: {entry!r} is not an IP address, a network"
                    " (10.0.0.0/8) or a host name"
                )
            hosts.add(host)
        return cls(tuple(networks), frozenset(hosts))

    def allows(self, host: str, address: Address) -> bool:
        """Whether a URL naming ``host`` may reach ``address``, which is not public."""
        if is_metadata(address):
            return any(n.num_addresses == 1 and n.network_address == address for n in self.networks)
        if host in self.hosts:
            return True
        inner = _embedded(address)
        candidates = [address] if inner is None else [address, inner[0]]
        # Compare like with like: ipaddress answers `IPv4Address in IPv6Network` by bit mask.
        return any(a in n for a in candidates for n in self.networks if a.version == n.version)


@dataclass(frozen=True)
class _Target:
    """A receiver URL taken apart: what to connect to and what to ask for."""

    scheme: str
    host: str  # ASCII: a host name (IDNA) or an IP address without brackets
    port: int
    path: str  # path and query, percent-encoded ASCII

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"


def _parse_target(url: str) -> _Target:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise Refused(f"{url[:100]!r} is not a valid URL (check the host and the port)") from None
    if not parts.scheme:
        raise Refused("the URL needs https:// (or http://) in front")
    if parts.scheme not in ("http", "https"):
        raise Refused(f"only http and https URLs can receive notices, not {parts.scheme}: ones")
    if not is_http_url(url):
        raise Refused("the URL needs a host and no spaces, e.g. https://hooks.example/benchwatch")
    if parts.username is not None or parts.password is not None:
        raise Refused(
            "the URL holds a user name or password: remove them (notices are signed instead)"
        )
    if port == 0:
        raise Refused("the URL's port is 0: give the receiver's real port, or none")
    host = parts.hostname or ""
    try:
        host = str(ipaddress.ip_address(host))
    except ValueError:
        if (name := _host_name(host)) is None:
            raise Refused(f"{host!r} is not a valid host name") from None
        host = name
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    path = quote(path, safe="!#$%&'()*+,/:;=?@[]~")  # escapes only what may not stand in a URL
    return _Target(parts.scheme, host, port or (443 if parts.scheme == "https" else 80), path)


def _one_line(text: str, limit: int = ERROR_CHARS) -> str:
    return " ".join(text.split())[:limit]


def _resolve(host: str, port: int, timeout_s: float) -> list[Address]:
    """Every address of ``host``, in the resolver's order, looked up once within ``timeout_s``.

    The lookup runs in a daemon thread: ``getaddrinfo`` takes no timeout, and one stuck on
    a dead DNS server must not hold a delivery (or a request creating a subscription).
    """
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    found: list[Any] = []
    failed: list[BaseException] = []

    def lookup() -> None:
        try:
            found.extend(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except Exception as exc:  # handed to the waiting thread, which reports it
            failed.append(exc)

    thread = threading.Thread(target=lookup, name="benchwatch-resolve", daemon=True)
    thread.start()
    thread.join(max(timeout_s, 0.0))
    if thread.is_alive():
        raise DeliveryError(f"looking up {host} took longer than {timeout_s:g} s")
    if failed:
        raise DeliveryError(f"{host} does not resolve ({_one_line(str(failed[0]))})")
    addresses = list(dict.fromkeys(ipaddress.ip_address(info[4][0]) for info in found))
    if not addresses:
        raise DeliveryError(f"{host} has no address")
    return addresses


def _check_addresses(host: str, addresses: Iterable[Address], allow: AllowList) -> None:
    for address in addresses:
        kind = forbidden_kind(address)
        if kind is None or allow.allows(host, address):
            continue
        where = str(address) if host == str(address) else f"{host} resolves to {address}, which"
        if kind == "cloud metadata":
            raise Refused(
                f"{where} is a cloud metadata address: notices are never sent there unless the"
                " operator lists that very address in BENCHWATCH_RECEIVER_ALLOW"
            )
        article = "an" if kind[0] in "aeiou" else "a"
        raise Refused(
            f"{where} is {article} {kind} address: notices go to public addresses only, unless the"
            " operator allows this one in BENCHWATCH_RECEIVER_ALLOW"
        )


def check_target(
    url: str,
    allow: AllowList,
    *,
    dns_timeout_s: float = DNS_TIMEOUT_S,
    unresolved_ok: bool = False,
) -> list[Address]:
    """Refuse a receiver URL that benchwatch must not send to (at creation; delivery rechecks).

    Refused: a scheme other than http(s), a user name or password in the URL, a host name
    that does not resolve (unless ``unresolved_ok``: nothing can be reached through it yet,
    and every delivery resolves and checks again), or one address of the host (all are
    checked) that is not public and not allowed by ``allow``.

    Returns:
        The host's addresses, every one checked (none when it did not resolve and
        ``unresolved_ok``): a client that looks the name up itself connects to these only
        through ``lookups_pinned``.

    Raises:
        Refused: why, in a sentence for the URL's author.
    """
    target = _parse_target(url)
    try:
        addresses = _resolve(target.host, target.port, dns_timeout_s)
    except DeliveryError as exc:
        if unresolved_ok:
            return []
        raise Refused(f"{exc}: check the host name") from None
    _check_addresses(target.host, addresses, allow)
    return addresses


# Host names resolved only to addresses already checked, while a ``lookups_pinned`` block
# holds them: each holder's checked addresses, per lower-cased name.
_pins: dict[str, list[list[Address]]] = {}
_pins_lock = threading.Lock()


def _pinned_getaddrinfo(
    lookup: Callable[..., list[Any]], host: Any, port: Any, *args: Any, **kwargs: Any
) -> list[Any]:
    with _pins_lock:
        held = _pins.get(host.lower()) if isinstance(host, str) else None
        pinned = list(dict.fromkeys(a for addresses in held for a in addresses)) if held else []
    if not pinned:
        return lookup(host, port, *args, **kwargs)
    return [info for address in pinned for info in lookup(str(address), port, *args, **kwargs)]


@contextmanager
def lookups_pinned(host: str, addresses: list[Address]) -> Iterator[None]:
    """While in this block, the process resolves ``host`` to the checked ``addresses`` only.

    For a client that looks the name up itself (Apprise, through requests, from a thread of
    its own): without this, a DNS server that answers with a public address for the check
    and a private one a moment later would send the notice into the operator's network. It
    wraps ``socket.getaddrinfo`` once per process; other names pass through unchanged, and
    another lookup of this name meanwhile gets addresses that were checked too. TLS still
    verifies the certificate against the host name.
    """
    key, entry = host.lower(), list(addresses)
    with _pins_lock:
        if not hasattr(socket.getaddrinfo, "benchwatch_pins"):
            wrapper = functools.partial(_pinned_getaddrinfo, socket.getaddrinfo)
            wrapper.benchwatch_pins = True  # type: ignore[attr-defined]
            socket.getaddrinfo = wrapper
        _pins.setdefault(key, []).append(entry)
    try:
        yield
    finally:
        with _pins_lock:
            _pins[key].remove(entry)
            if not _pins[key]:
                del _pins[key]


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
    target = _parse_target(url)
    addresses = _resolve(target.host, target.port, min(DNS_TIMEOUT_S, timeout_s))
    _check_addresses(target.host, addresses, allow)
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
        raise DeliveryError(f"{target.host}: {_one_line(str(exc), 300)}") from None
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
        location = _one_line(response.headers.get("location", "none"))
        error = f"HTTP {status}: redirects are not followed (Location: {location})"
    elif status == 410:
        error = "HTTP 410 Gone: the receiver asked not to be sent more notices; it is switched off"
    else:
        text = response.body[: ERROR_CHARS * 4].decode("utf-8", errors="replace")
        error = f"HTTP {status}: {_one_line(text)}".rstrip(": ")
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
