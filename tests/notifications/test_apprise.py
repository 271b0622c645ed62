"""Apprise receivers: a Mattermost URL delivered by Apprise to a local HTTP server, the
scheme list, and the SSRF guard on the host Apprise would contact."""

import json
import logging
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

from app.notifications import message as notices
from app.notifications.guard import AllowList
from app.notifications.message import Message
from app.notifications.receivers import SendContext
from app.notifications.receivers.apprise_receiver import check_host, check_scheme, send

SUBSCRIPTION = {"id": 1, "name": "perf team", "owner": "perf@example.com", "revision": 3}


def notice() -> Message:
    return notices.test_message(
        "notice-42", SUBSCRIPTION, "https://bw.example", "2026-12-01T14:00:00Z"
    )


@dataclass
class Mattermost:
    """What the fake Mattermost was sent, and how it answers."""

    port: int = 0
    posts: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    status: int = 200
    location: str = ""


class Handler(BaseHTTPRequestHandler):
    state: ClassVar[Mattermost]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).state.posts.append((self.path, json.loads(body)))
        state = type(self).state
        answer = b"ok"
        self.send_response(state.status)
        if state.location:
            self.send_header("Location", state.location)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def mattermost() -> Iterator[Mattermost]:
    state = Mattermost()
    server = ThreadingHTTPServer(("127.0.0.1", 0), type("MM", (Handler,), {"state": state}))
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    state.port = server.server_address[1]
    yield state
    server.shutdown()
    server.server_close()
    thread.join()


def receiver(url: str) -> dict[str, Any]:
    return {"kind": "apprise", "url": url, "disabled": False, "disabled_reason": ""}


def context(**changes: Any) -> SendContext:
    fields: dict[str, Any] = {
        "public_url": "https://bw.example",
        "receiver_allow": "127.0.0.1",
        "apprise_schemes": "workflows,discord,mmost,mmosts",
        "timeout_s": 5.0,
        **changes,
    }
    return SendContext(**fields)


def test_mattermost_receives_the_notice(mattermost: Mattermost) -> None:
    url = f"mmost://127.0.0.1:{mattermost.port}/tok3n"
    outcome = send(receiver(url), notice(), context())

    assert outcome.ok, outcome.error
    ((path, payload),) = mattermost.posts
    assert path == "/hooks/tok3n"  # Apprise's Mattermost webhook: http://host:port/hooks/token
    text = payload["text"]
    assert "Test notice for subscription \\'perf team\\'\\: nothing regressed" in text
    assert "regression \\+34\\.5\\% latency\\_ms test/test\\-notice" in text
    assert "[Open in benchwatch](https://bw.example/alerts)" in text


def test_without_the_allow_list_a_loopback_host_is_refused(mattermost: Mattermost) -> None:
    url = f"mmost://127.0.0.1:{mattermost.port}/tok3n"
    outcome = send(receiver(url), notice(), context(receiver_allow=""))
    assert not outcome.ok
    assert not outcome.retry
    assert "loopback" in outcome.error
    assert not mattermost.posts


def test_the_host_apprise_reads_is_the_one_checked(mattermost: Mattermost) -> None:
    """Apprise reads ``a@b.invalid@127.0.0.1`` as user ``a`` at host ``b.invalid``."""
    url = f"mmost://a@b.invalid@127.0.0.1:{mattermost.port}/tok3n"
    outcome = send(receiver(url), notice(), context())
    assert not outcome.ok
    assert outcome.error.startswith("b.invalid does not resolve")
    assert outcome.retry  # a failed lookup may be brief
    assert not mattermost.posts


def test_a_scheme_not_in_the_list_is_refused(mattermost: Mattermost) -> None:
    url = f"json://127.0.0.1:{mattermost.port}/"
    outcome = send(receiver(url), notice(), context())
    assert not outcome.ok
    assert not outcome.retry
    assert "json:// URLs are not allowed here" in outcome.error
    assert "mmost://" in outcome.error
    assert not mattermost.posts


def test_redirects_are_not_followed_whatever_the_url_says(mattermost: Mattermost) -> None:
    mattermost.status = 307
    mattermost.location = f"http://127.0.0.1:{mattermost.port}/elsewhere"
    url = f"mmost://127.0.0.1:{mattermost.port}/tok3n?redirect=yes"
    outcome = send(receiver(url), notice(), context())
    assert not outcome.ok
    assert outcome.retry
    assert [path for path, _ in mattermost.posts] == ["/hooks/tok3n"]


def test_a_failing_service_is_tried_once_per_attempt(mattermost: Mattermost) -> None:
    mattermost.status = 503
    url = f"mmost://127.0.0.1:{mattermost.port}/tok3n?retry=5"
    outcome = send(receiver(url), notice(), context())
    assert not outcome.ok
    assert outcome.retry
    assert "503" in outcome.error
    assert len(mattermost.posts) == 1


def test_check_scheme() -> None:
    check_scheme("mmosts://chat.example/tok", "msteams, MMOSTS")
    with pytest.raises(ValueError, match=r"discord:// URLs are not allowed here"):
        check_scheme("discord://1/2", "mmost")
    with pytest.raises(ValueError, match="not allowed"):
        check_scheme("no scheme at all", "mmost")


def test_check_host() -> None:
    with pytest.raises(ValueError, match="loopback"):
        check_host("mmost://127.0.0.1:8065/tok", AllowList())
    with pytest.raises(ValueError, match="metadata"):
        check_host("json://169.254.169.254/latest", AllowList.parse("169.254.0.0/16"))
    with pytest.raises(ValueError, match="more than one @"):
        check_host("mmost://a@b@127.0.0.1/tok", AllowList.parse("127.0.0.1"))
    check_host("mmost://127.0.0.1:8065/tok", AllowList.parse("127.0.0.1"))
    # Discord posts to discord.com whatever the URL's first part is: nothing to look up.
    check_host("discord://10.0.0.1/token", AllowList())


def test_apprise_is_not_loaded_by_the_module() -> None:
    """The API process imports this module to check URLs; Apprise must stay out of it."""
    code = (
        "import sys, app.notifications.receivers.apprise_receiver;"
        "sys.exit('apprise' in sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_a_name_that_rebinds_after_the_check_is_not_followed(
    mattermost: Mattermost, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check sees a public address; Apprise's own lookup, a moment later, would see the
    loopback server. It must connect to the address that was checked."""
    public = "93.184.216.34"  # public, so the guard lets it through; unreachable from here
    real = socket.getaddrinfo
    answers: list[str] = []

    def rebinding(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host != "rebind.example":
            return real(host, port, *args, **kwargs)
        answers.append(public if not answers else "127.0.0.1")
        return real(answers[-1], port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    url = f"mmost://rebind.example:{mattermost.port}/tok3n"
    outcome = send(receiver(url), notice(), context(receiver_allow="", timeout_s=1.0))
    assert not outcome.ok
    assert not mattermost.posts  # never the loopback server the second answer named
    assert answers == [public]  # the name was looked up once, for the check
    # Once the notice is done, other names are looked up as before.
    assert socket.getaddrinfo("127.0.0.1", 80)[0][4][0] == "127.0.0.1"


def test_the_title_is_escaped_for_markdown(mattermost: Mattermost) -> None:
    """Issue 26 point 5: the headline (uploaded names) reached Mattermost's Markdown as it
    was, so a model ``@channel`` pinged the channel and a crafted link rendered live."""
    import dataclasses

    crafted = "@channel [verify your token](https://evil.example/login) regressed"
    message = notice()
    message = dataclasses.replace(message, payload={**message.payload, "headline": crafted})
    outcome = send(receiver(f"mmost://127.0.0.1:{mattermost.port}/tok3n"), message, context())

    assert outcome.ok, outcome.error
    ((_, payload),) = mattermost.posts
    text = json.dumps(payload, ensure_ascii=False)
    assert "@channel" not in text
    assert "](https://evil.example" not in text
    assert "\\\\[verify your token\\\\]\\\\(https" in text


def test_the_url_s_credentials_reach_neither_the_log_nor_the_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 26 point 7: Apprise logs the URL it posts to and its socket errors quote it,
    token included, into the service's log."""
    with socket.socket() as probe:  # a port nothing listens on: the send fails
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"mmost://us3r:pa55w0rd@127.0.0.1:{port}/tok3nSECRET?channel=ops-secret"
    with caplog.at_level(logging.DEBUG, logger="apprise"):
        outcome = send(receiver(url), notice(), context())

    assert not outcome.ok
    assert "Connection error" in outcome.error
    assert "Socket Exception" in caplog.text  # Apprise did log the failure
    for secret in ("tok3nSECRET", "pa55w0rd", "us3r", "ops-secret"):
        assert secret not in caplog.text
        assert secret not in outcome.error


def test_a_proxy_in_the_environment_does_not_carry_a_checked_host(
    mattermost: Mattermost, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 26 point 10: requests (under Apprise) sent the notice to HTTP_PROXY, which looks
    the host up itself, past the pinned, checked addresses."""
    proxy = Mattermost()
    server = ThreadingHTTPServer(("127.0.0.1", 0), type("Proxy", (Handler,), {"state": proxy}))
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        for name in ("NO_PROXY", "no_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{server.server_address[1]}")
        outcome = send(receiver(f"mmost://127.0.0.1:{mattermost.port}/tok3n"), notice(), context())
        assert not outcome.ok
        assert "NO_PROXY" in outcome.error
        assert proxy.posts == []
        assert mattermost.posts == []

        monkeypatch.setenv("NO_PROXY", "127.0.0.1")  # the operator says to go direct
        outcome = send(receiver(f"mmost://127.0.0.1:{mattermost.port}/tok3n"), notice(), context())
        assert outcome.ok, outcome.error
        assert proxy.posts == []
        assert len(mattermost.posts) == 1
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
