"""The outgoing-HTTP path and its SSRF guard, against a real HTTP server on 127.0.0.1."""

import ssl
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import trustme

from app.notifications.guard import AllowList, DeliveryError, Refused, check_target
from app.notifications.outbound import post, post_for_outcome, request
from app.notifications.receivers import SendContext

Route = Callable[[BaseHTTPRequestHandler], None]
LOOPBACK = AllowList.parse("127.0.0.1")
MEGABYTE = b"x" * 1_000_000  # made once, so that serving it allocates nothing


@dataclass
class Seen:
    """A request the local receiver got."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class LocalReceiver:
    """A real HTTP(S) server on 127.0.0.1: ``routes`` say how each path answers."""

    port: int
    scheme: str
    routes: dict[str, Route] = field(default_factory=dict)
    seen: list[Seen] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)  # ends stalled answers

    def url(self, path: str = "/hook", host: str = "127.0.0.1") -> str:
        return f"{self.scheme}://{host}:{self.port}{path}"

    @property
    def paths(self) -> list[str]:
        return [seen.path for seen in self.seen]


def answer(status: int, body: bytes = b"ok", headers: Mapping[str, str] | None = None) -> Route:
    def route(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(status)
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.send_header("content-length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    return route


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # server_close() joins the handler threads: nothing outlives a test


@contextmanager
def local_receiver(tls: ssl.SSLContext | None = None) -> Iterator[LocalReceiver]:
    """Serve in a thread until the block ends; unknown paths answer 200 "ok"."""
    state = LocalReceiver(0, "https" if tls else "http")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_any(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            headers = {name.lower(): value for name, value in self.headers.items()}
            state.seen.append(Seen(self.command, self.path, headers, body))
            try:
                state.routes.get(self.path, answer(200))(self)
            except ConnectionError:  # the client gave up (a timeout, a body cap): expected
                self.close_connection = True

        do_GET = do_POST = do_PATCH = do_any

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = _Server(("127.0.0.1", 0), Handler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield state
    finally:
        state.release.set()
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def receiver() -> Iterator[LocalReceiver]:
    with local_receiver() as serving:
        yield serving


def context(allow: str = "127.0.0.1", timeout_s: float = 2.0) -> SendContext:
    return SendContext(public_url="https://bw.example", receiver_allow=allow, timeout_s=timeout_s)


def test_loopback_is_refused_without_an_allow_list(receiver: LocalReceiver) -> None:
    with pytest.raises(Refused, match=r"127\.0\.0\.1 is a loopback address.*RECEIVER_ALLOW"):
        post(receiver.url(), content=b"{}", headers={}, allow=AllowList(), timeout_s=1)
    with pytest.raises(Refused, match=r"localhost resolves to 127\.0\.0\.1, which is a loopback"):
        check_target(receiver.url(host="localhost"), AllowList())
    outcome = post_for_outcome(receiver.url(), content=b"{}", headers={}, context=context(""))
    assert (outcome.ok, outcome.retry, outcome.status) == (False, False, None)
    assert "loopback" in outcome.error
    assert receiver.seen == []


@pytest.mark.parametrize(
    ("allow", "host"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("10.0.0.0/8, 127.0.0.0/8", "127.0.0.1"),
        ("LOCALHOST.", "localhost"),
    ],
)
def test_an_allow_listed_receiver_is_reached(
    receiver: LocalReceiver, allow: str, host: str
) -> None:
    url = receiver.url("/hook?x=1", host=host)
    check_target(url, AllowList.parse(allow))
    response = post(
        url,
        content=b'{"a":1}',
        headers={"content-type": "application/json"},
        allow=AllowList.parse(allow),
        timeout_s=2,
    )
    assert (response.status, response.body, response.truncated) == (200, b"ok", False)
    assert 0 < response.latency_ms < 2000
    [seen] = receiver.seen
    assert (seen.method, seen.path, seen.body) == ("POST", "/hook?x=1", b'{"a":1}')
    assert seen.headers["host"] == f"{host}:{receiver.port}"
    assert seen.headers["user-agent"] == "benchwatch"


def test_a_host_name_entry_does_not_allow_other_names(receiver: LocalReceiver) -> None:
    with pytest.raises(Refused, match="loopback"):
        check_target(receiver.url(host="127.0.0.1"), AllowList.parse("localhost"))


def test_get_and_patch_through_request(receiver: LocalReceiver) -> None:
    receiver.routes["/issue"] = answer(201, b'{"number": 7}', {"content-type": "application/json"})
    got = request("GET", receiver.url("/issue"), headers={}, allow=LOOPBACK, timeout_s=2)
    patched = request(
        "PATCH", receiver.url("/issue"), content=b"{}", headers={}, allow=LOOPBACK, timeout_s=2
    )
    assert (got.status, got.body, got.headers["content-type"]) == (
        201,
        b'{"number": 7}',
        "application/json",
    )
    assert patched.status == 201
    assert [(s.method, s.body) for s in receiver.seen] == [("GET", b""), ("PATCH", b"{}")]
    assert "content-length" not in receiver.seen[0].headers


@pytest.mark.parametrize(
    ("host", "kind"),
    [
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("127.0.0.2", "loopback"),
        ("127.1", "loopback"),  # an old short form getaddrinfo still reads
        ("2130706433", "loopback"),  # 127.0.0.1 as one number
        ("0.0.0.0", "unspecified"),
        ("169.254.1.1", "link-local"),
        ("169.254.169.254", "cloud metadata"),
        ("100.100.100.200", "cloud metadata"),
        ("[fd00:ec2::254]", "cloud metadata"),
        ("100.64.0.1", "shared"),
        ("224.0.0.1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("192.0.0.8", "special-purpose"),
        ("255.255.255.255", "reserved"),
        ("[2001:db8::1]", "private"),  # documentation
        ("[::1]", "loopback"),
        ("[::]", "unspecified"),
        ("[fe80::1]", "link-local"),
        ("[fc00::1]", "private"),
        ("[ff02::1]", "multicast"),
        ("[::ffff:127.0.0.1]", "loopback (as IPv4-mapped IPv6)"),
        ("[::ffff:10.0.0.1]", "private (as IPv4-mapped IPv6)"),
        ("[::ffff:169.254.169.254]", "cloud metadata"),
        ("[64:ff9b::a9fe:a9fe]", "cloud metadata"),  # NAT64 of 169.254.169.254
        ("[64:ff9b::7f00:1]", "loopback (as NAT64 IPv6)"),
        ("[2002:c0a8:101::]", "private (as 6to4 IPv6)"),
        ("[2001::1]", "reserved (as Teredo IPv6)"),
        ("[2001:0:4136:e378:8000:63bf:f7f7:f7f7]", "private"),  # Teredo, whatever it holds
    ],
)
def test_non_public_addresses_are_refused(host: str, kind: str) -> None:
    with pytest.raises(Refused, match=f"is an? {kind.replace('(', '.').replace(')', '.')}"):
        check_target(f"https://{host}/hook", AllowList())


@pytest.mark.parametrize("host", ["8.8.8.8", "[2606:4700:4700::1111]", "[64:ff9b::808:808]"])
def test_public_addresses_pass(host: str) -> None:
    check_target(f"https://{host}:8443/hook", AllowList())


def test_metadata_needs_its_very_address_in_the_allow_list() -> None:
    wide = AllowList.parse("169.254.0.0/16, metadata.example")
    check_target("http://169.254.1.1/", wide)
    with pytest.raises(Refused, match=r"cloud metadata.*that very address"):
        check_target("http://169.254.169.254/latest/meta-data/", wide)
    check_target("http://169.254.169.254/latest/meta-data/", AllowList.parse("169.254.169.254"))


def test_an_allowed_network_covers_its_ipv4_mapped_form() -> None:
    check_target("http://[::ffff:10.0.0.1]/", AllowList.parse("10.0.0.0/8"))
    check_target("http://[fd00::1]:9000/", AllowList.parse("fd00::/8"))
    with pytest.raises(Refused, match="private"):
        check_target("http://[fc00::1]/", AllowList.parse("fd00::/8"))


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("ftp://hooks.example/x", "only http and https"),
        ("file:///etc/passwd", "only http and https"),
        ("hooks.example/x", "needs https://"),
        ("https://user:secret@hooks.example/x", "user name or password"),
        ("https://user@hooks.example/x", "user name or password"),
        ("https://hooks.example:0/x", "port is 0"),
        ("https://hooks.example:99999/x", "not a valid URL"),
        ("https://hooks.example/a b", "no spaces"),
        ("https://-bad-.example/x", "not a valid host name"),
    ],
)
def test_urls_of_the_wrong_shape_are_refused(url: str, says: str) -> None:
    with pytest.raises(Refused, match=says):
        check_target(url, AllowList.parse("0.0.0.0/0, ::/0"))


def test_a_name_that_does_not_resolve() -> None:
    url = "https://no-such-receiver.invalid/hook"
    with pytest.raises(
        Refused, match=r"no-such-receiver\.invalid does not resolve.*check the host"
    ):
        check_target(url, AllowList())
    with pytest.raises(DeliveryError, match="does not resolve"):
        post(url, content=b"", headers={}, allow=AllowList(), timeout_s=2)
    outcome = post_for_outcome(url, content=b"", headers={}, context=context())
    assert (outcome.ok, outcome.retry) == (False, True)  # DNS may come back


def test_allow_list_parsing() -> None:
    allow = AllowList.parse(" 10.0.0.0/8, ,127.0.0.1,fd00::/8, Hooks.Internal., [::1] ,")
    assert [str(n) for n in allow.networks] == ["10.0.0.0/8", "127.0.0.1/32", "fd00::/8", "::1/128"]
    assert allow.hosts == {"hooks.internal"}
    assert AllowList.parse("") == AllowList()
    with pytest.raises(ValueError, match=r"'10\.0\.0\.1/8' is not a network"):
        AllowList.parse("localhost, 10.0.0.1/8")
    with pytest.raises(ValueError, match="'http://hooks' is not an IP address"):
        AllowList.parse("http://hooks")


def test_a_bad_allow_list_fails_the_attempt_but_keeps_the_notice(receiver: LocalReceiver) -> None:
    outcome = post_for_outcome(receiver.url(), content=b"", headers={}, context=context("a b"))
    assert (outcome.ok, outcome.retry) == (False, True)
    assert "'a b'" in outcome.error
    assert receiver.seen == []


def test_redirects_are_not_followed(receiver: LocalReceiver) -> None:
    receiver.routes["/hook"] = answer(302, b"", {"location": receiver.url("/elsewhere")})
    response = post(receiver.url(), content=b"{}", headers={}, allow=LOOPBACK, timeout_s=2)
    assert response.status == 302
    outcome = post_for_outcome(receiver.url(), content=b"{}", headers={}, context=context())
    assert (outcome.ok, outcome.retry, outcome.status) == (False, False, 302)
    assert outcome.error == (
        f"HTTP 302: redirects are not followed (Location: {receiver.url('/elsewhere')})"
    )
    assert receiver.paths == ["/hook", "/hook"]


def test_the_response_body_is_capped(receiver: LocalReceiver) -> None:
    def flood(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("content-length", str(len(MEGABYTE)))
        handler.end_headers()
        view = memoryview(MEGABYTE)
        for start in range(0, len(view), 16_384):
            handler.wfile.write(view[start : start + 16_384])

    receiver.routes["/big"] = flood
    tracemalloc.start()
    try:
        response = post(receiver.url("/big"), content=b"", headers={}, allow=LOOPBACK, timeout_s=2)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(response.body) == 64 * 1024
    assert response.truncated
    assert response.body == MEGABYTE[: 64 * 1024]
    assert peak < 800_000  # the megabyte was not read into memory (about 0.4 MB is)


def test_a_slow_receiver_times_out(receiver: LocalReceiver) -> None:
    def stall(handler: BaseHTTPRequestHandler) -> None:
        receiver.release.wait(10)
        answer(200)(handler)

    receiver.routes["/hook"] = stall
    started = time.monotonic()
    with pytest.raises(DeliveryError, match=r"no answer within 0\.5 s"):
        post(receiver.url(), content=b"{}", headers={}, allow=LOOPBACK, timeout_s=0.5)
    outcome = post_for_outcome(
        receiver.url(), content=b"{}", headers={}, context=context(timeout_s=0.5)
    )
    assert time.monotonic() - started < 2.0
    assert (outcome.ok, outcome.retry, outcome.status) == (False, True, None)
    assert 400 < outcome.latency_ms < 1500


def test_the_timeout_covers_the_whole_answer(receiver: LocalReceiver) -> None:
    """A receiver that sends a byte now and then cannot hold a delivery past its timeout."""

    def drip(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("content-length", "1000")
        handler.end_headers()
        handler.wfile.flush()
        while not receiver.release.wait(0.05):
            handler.wfile.write(b"x")
            handler.wfile.flush()

    receiver.routes["/hook"] = drip
    started = time.monotonic()
    with pytest.raises(DeliveryError, match="no answer within"):
        post(receiver.url(), content=b"{}", headers={}, allow=LOOPBACK, timeout_s=0.5)
    assert time.monotonic() - started < 1.0


@pytest.mark.parametrize(
    ("status", "body", "ok", "retry", "disable", "error"),
    [
        (200, b"ok", True, False, False, ""),
        (204, b"", True, False, False, ""),
        (410, b"gone", False, False, True, "HTTP 410 Gone: the receiver asked not to be sent"),
        (500, b"boom", False, True, False, "HTTP 500: boom"),
        (503, b"", False, True, False, "HTTP 503"),
        (429, b"slow down", False, True, False, "HTTP 429: slow down"),
        (408, b"", False, True, False, "HTTP 408"),
        (400, b"bad\npayload\r\n  here", False, False, False, "HTTP 400: bad payload here"),
        (404, b"no_service", False, False, False, "HTTP 404: no_service"),
        (400, "é".encode() * 300, False, False, False, "HTTP 400: " + "é" * 200),
    ],
)
def test_outcomes_of_answers(
    receiver: LocalReceiver,
    status: int,
    body: bytes,
    ok: bool,
    retry: bool,
    disable: bool,
    error: str,
) -> None:
    receiver.routes["/hook"] = answer(status, body)
    outcome = post_for_outcome(receiver.url(), content=b"{}", headers={}, context=context())
    assert (outcome.ok, outcome.status, outcome.retry, outcome.disable) == (
        ok,
        status,
        retry,
        disable,
    )
    assert outcome.error.startswith(error)
    assert len(outcome.error) <= len("HTTP 400: ") + 200 or disable
    assert outcome.latency_ms > 0


def test_connection_refused_is_retried() -> None:
    with local_receiver() as gone:
        url = gone.url()
    outcome = post_for_outcome(url, content=b"{}", headers={}, context=context())
    assert (outcome.ok, outcome.retry) == (False, True)
    assert "Connection refused" in outcome.error


@pytest.fixture(scope="module")
def authority() -> trustme.CA:
    return trustme.CA()


def _tls(authority: trustme.CA, name: str) -> ssl.SSLContext:
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert(name).configure_cert(server)
    return server


def _trusting(authority: trustme.CA) -> ssl.SSLContext:
    client = ssl.create_default_context()
    authority.configure_trust(client)
    return client


def test_tls_is_verified_against_the_host_name_not_the_address(authority: trustme.CA) -> None:
    allow = AllowList.parse("localhost, 127.0.0.1")
    with local_receiver(_tls(authority, "localhost")) as receiver:
        response = request(
            "GET",
            receiver.url(host="localhost"),
            headers={},
            allow=allow,
            timeout_s=2,
            ssl_context=_trusting(authority),
        )
        assert response.status == 200
        assert receiver.seen[0].headers["host"] == f"localhost:{receiver.port}"
        # The certificate names localhost; the address it was reached at does not match it.
        with pytest.raises(DeliveryError, match="certificate verify failed"):
            request(
                "GET",
                receiver.url(host="127.0.0.1"),
                headers={},
                allow=allow,
                timeout_s=2,
                ssl_context=_trusting(authority),
            )
        with pytest.raises(DeliveryError, match="certificate verify failed"):  # unknown CA
            request("GET", receiver.url(host="localhost"), headers={}, allow=allow, timeout_s=2)
