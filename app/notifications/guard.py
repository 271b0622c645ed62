"""The SSRF guard: where a notice may be sent, checked before every request.

Whoever manages subscriptions chooses a receiver's URL, and the request leaves from a worker
inside the operator's network; unguarded, ``http://169.254.169.254/...`` or
``http://10.0.0.5:6379/`` would make benchwatch a proxy into that network. So a target:

- is an http(s) URL without a user name or password (``parse_target``);
- has its host name resolved once (within ``DNS_TIMEOUT_S``, ``resolve``) and is refused when
  any of its addresses is not public (``forbidden_kind``: loopback, private, link-local,
  metadata, ...) unless the operator allows it (``BENCHWATCH_RECEIVER_ALLOW``, ``AllowList``);
- is then reached at an address that was checked, never by looking the name up again:
  ``outbound.request`` connects to the address itself, and a client that does its own
  lookups (Apprise) runs inside ``lookups_pinned``.
"""

import functools
import ipaddress
import re
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

from app.core.urls import is_http_url

ONE_LINE_CHARS = 200  # of an error quoted on one line

DNS_TIMEOUT_S = 3.0  # a lookup that takes longer fails (and counts against timeout_s)

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
class Target:
    """A receiver URL taken apart: what to connect to and what to ask for."""

    scheme: str
    host: str  # ASCII: a host name (IDNA) or an IP address without brackets
    port: int
    path: str  # path and query, percent-encoded ASCII

    @property
    def host_header(self) -> str:
        """The Host header: the host, and the port when it is not the scheme's."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"


def parse_target(url: str) -> Target:
    """``url`` taken apart, or Refused: not http(s), credentials, port 0, a bad host."""
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
    return Target(parts.scheme, host, port or (443 if parts.scheme == "https" else 80), path)


def one_line(text: str, limit: int = ONE_LINE_CHARS) -> str:
    """``text`` on one line, at most ``limit`` characters."""
    return " ".join(text.split())[:limit]


def resolve(host: str, port: int, timeout_s: float) -> list[Address]:
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
        raise DeliveryError(f"{host} does not resolve ({one_line(str(failed[0]))})")
    addresses = list(dict.fromkeys(ipaddress.ip_address(info[4][0]) for info in found))
    if not addresses:
        raise DeliveryError(f"{host} has no address")
    return addresses


def check_addresses(host: str, addresses: Iterable[Address], allow: AllowList) -> None:
    """Refused at the first of ``host``'s addresses that is not public and not allowed."""
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
    target = parse_target(url)
    try:
        addresses = resolve(target.host, target.port, dns_timeout_s)
    except DeliveryError as exc:
        if unresolved_ok:
            return []
        raise Refused(f"{exc}: check the host name") from None
    check_addresses(target.host, addresses, allow)
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
