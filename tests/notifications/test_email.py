"""Email receivers against a real SMTP server (aiosmtpd) in a thread: what arrives, and how
failures are told apart (4xx again later, 5xx never)."""

import email
import email.policy
import socket
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from email.message import EmailMessage
from typing import Any

import pytest
import trustme
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session

from app.notifications import message as notices
from app.notifications.message import Message
from app.notifications.receivers import SendContext
from app.notifications.receivers.email import NO_SMTP, NO_STARTTLS, build, deliver, send
from tests.notifications.test_chart import decode

SUBSCRIPTION = {"id": 1, "name": "perf team", "owner": "perf@example.com", "revision": 3}
RECEIVER = {"kind": "email", "to": ["perf@example.com", "oncall@example.com"], "disabled": False}
USER, PASSWORD = "benchwatch", "s3cret"


def notice(**changes: Any) -> Message:
    """The test notice (a made-up regression), with payload fields replaced."""
    message = notices.test_message(
        "notice-42", SUBSCRIPTION, "https://bw.example", "2026-12-01T14:00:00Z"
    )
    return Message(message.id, {**message.payload, **changes})


@dataclass
class Recorder:
    """An SMTP handler that keeps what it is sent, and answers as told."""

    data_reply: str = "250 2.0.0 OK"
    rcpt_reply: str = "250 2.1.5 OK"
    received: list[Envelope] = field(default_factory=list)
    tls: list[bool] = field(default_factory=list)
    authenticated: list[bool] = field(default_factory=list)

    async def handle_RCPT(
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: list[str]
    ) -> str:
        if self.rcpt_reply.startswith("250"):
            envelope.rcpt_tos.append(address)
        return self.rcpt_reply

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        if self.data_reply.startswith("250"):
            self.received.append(envelope)
            self.tls.append(session.ssl is not None)
            self.authenticated.append(bool(session.authenticated))
        return self.data_reply


class BoundController(Controller):
    """aiosmtpd's Controller on a socket bound beforehand to a free port (no port races)."""

    def __init__(self, handler: Recorder, sock: socket.socket, **kwargs: Any) -> None:
        super().__init__(handler, hostname="127.0.0.1", port=sock.getsockname()[1], **kwargs)
        self.sock = sock

    def _create_server(self) -> Any:
        return self.loop.create_server(self._factory_invoker, sock=self.sock, ssl=self.ssl_context)


@contextmanager
def smtp_server(handler: Recorder, **smtp_kwargs: Any) -> Iterator[int]:
    """An SMTP server on 127.0.0.1 for the block; yields its port, stops it after."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    controller = BoundController(handler, sock, **smtp_kwargs)
    try:
        controller.start()
    except BaseException:
        sock.close()
        raise
    try:
        yield sock.getsockname()[1]
    finally:
        controller.stop()


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def plain_port(recorder: Recorder) -> Iterator[int]:
    with smtp_server(recorder) as port:
        yield port


def plain_context(port: int, **changes: Any) -> SendContext:
    context = SendContext(
        public_url="https://bw.example",
        smtp_host="127.0.0.1",
        smtp_port=port,
        smtp_starttls=False,
        smtp_from="Benchwatch <benchwatch@bw.example>",
        timeout_s=5.0,
    )
    return replace(context, **changes)


def parse(envelope: Envelope) -> EmailMessage:
    assert isinstance(envelope.content, bytes)
    mail = email.message_from_bytes(envelope.content, policy=email.policy.default)
    assert isinstance(mail, EmailMessage)
    return mail


def test_plain_html_and_the_inline_chart_arrive(recorder: Recorder, plain_port: int) -> None:
    outcome = send(RECEIVER, notice(), plain_context(plain_port))

    assert outcome.ok, outcome.error
    assert outcome.status == 250
    assert not outcome.retry
    (envelope,) = recorder.received
    assert envelope.mail_from == "benchwatch@bw.example"
    assert envelope.rcpt_tos == RECEIVER["to"]
    mail = parse(envelope)
    assert mail["Subject"] == "Test notice for subscription 'perf team': nothing regressed"
    assert mail["To"].addresses[1].addr_spec == "oncall@example.com"
    assert mail["Message-ID"] == "<notice.notice-42@bw.example>"
    assert mail["Auto-Submitted"] == "auto-generated"
    assert mail.get_content_type() == "multipart/alternative"
    plain = mail.get_body(("plain",))
    assert plain is not None
    assert "regression +34.5% latency_ms test/test-notice/inductor/amp/inference" in (
        plain.get_content()
    )
    html_part = mail.get_body(("html",))
    assert html_part is not None
    html = html_part.get_content()
    assert '<a href="https://bw.example/alerts">Open in benchwatch</a>' in html
    related = mail.get_payload()[1]
    assert related.get_content_type() == "multipart/related"
    (image,) = [part for part in mail.walk() if part.get_content_type() == "image/png"]
    content_id = image["Content-ID"].strip("<>")
    assert f'src="cid:{content_id}"' in html
    chart = decode(image.get_content())
    assert (chart.width, chart.height) == (480, 160)


def test_crafted_payload_text_is_escaped_in_the_html(recorder: Recorder, plain_port: int) -> None:
    finding = dict(notice().findings[0])
    finding["model"] = "<script>alert(1)</script>"
    finding["hints"] = ['"><img src=x onerror=alert(2)>']
    finding["url"] = "javascript:alert(3)"
    message = notice(
        findings=[finding],
        headline="<b>bold</b>\r\nBcc: victim@evil.example",
        url="javascript:alert(4)",
    )

    assert send(RECEIVER, message, plain_context(plain_port)).ok
    mail = parse(recorder.received[0])
    html_part = mail.get_body(("html",))
    assert html_part is not None
    html = html_part.get_content()
    assert "<script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<img src=x" not in html
    assert "&quot;&gt;&lt;img src=x onerror=alert(2)&gt;" in html
    assert "javascript:" not in html
    assert "<b>bold</b>" not in html
    # The headline's line break does not start a header of its own.
    assert mail["Bcc"] is None
    assert mail["Subject"] == "<b>bold</b> Bcc: victim@evil.example"
    assert recorder.received[0].rcpt_tos == RECEIVER["to"]


def test_the_subject_is_cut() -> None:
    mail = build(RECEIVER, notice(headline="x" * 500), plain_context(25))
    assert len(mail["Subject"]) == 200
    assert mail["Subject"].endswith("…")


def test_an_address_that_is_not_one_fails_without_retry(plain_port: int) -> None:
    outcome = send({**RECEIVER, "to": ["a,b@example.com"]}, notice(), plain_context(plain_port))
    assert not outcome.ok
    assert not outcome.retry
    assert "not a mail address" in outcome.error


def test_no_chart_without_a_history(recorder: Recorder, plain_port: int) -> None:
    finding = {k: v for k, v in notice().findings[0].items() if k != "history"}
    assert send(RECEIVER, notice(findings=[finding]), plain_context(plain_port)).ok
    mail = parse(recorder.received[0])
    assert not [part for part in mail.walk() if part.get_content_maintype() == "image"]
    html_part = mail.get_body(("html",))
    assert html_part is not None
    assert "cid:" not in html_part.get_content()


def test_a_4xx_reply_is_tried_again(recorder: Recorder, plain_port: int) -> None:
    recorder.data_reply = "451 4.3.0 Try again later"
    outcome = send(RECEIVER, notice(), plain_context(plain_port))
    assert not outcome.ok
    assert outcome.retry
    assert outcome.status == 451
    assert "Try again later" in outcome.error


def test_a_5xx_reply_is_final(recorder: Recorder, plain_port: int) -> None:
    recorder.rcpt_reply = "550 5.1.1 No such user"
    outcome = send(RECEIVER, notice(), plain_context(plain_port))
    assert not outcome.ok
    assert not outcome.retry
    assert outcome.status == 550
    assert "No such user" in outcome.error


def test_no_smtp_host() -> None:
    outcome = send(RECEIVER, notice(), SendContext(public_url="https://bw.example"))
    assert outcome == replace(outcome, ok=False, retry=False, error=NO_SMTP)
    assert NO_SMTP == "no SMTP server configured (BENCHWATCH_SMTP_HOST)"


def test_a_server_that_is_not_there_is_tried_again() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    outcome = send(RECEIVER, notice(), plain_context(port))
    assert not outcome.ok
    assert outcome.retry
    assert "ConnectionRefusedError" in outcome.error


def test_starttls_is_required_when_configured(recorder: Recorder, plain_port: int) -> None:
    """A server without STARTTLS gets neither the password nor the mail in the clear."""
    context = plain_context(plain_port, smtp_starttls=True, smtp_username=USER)
    outcome = send(RECEIVER, notice(), context)
    assert not outcome.ok
    assert not outcome.retry
    assert outcome.error == NO_STARTTLS
    assert not recorder.received


@pytest.fixture(scope="module")
def authority() -> trustme.CA:
    """A certificate authority of the test's own, which issues the server's certificate."""
    return trustme.CA()


def authenticate(
    server: SMTP, session: Session, envelope: Envelope, mechanism: str, data: Any
) -> AuthResult:
    ok = isinstance(data, LoginPassword) and (data.login, data.password) == (
        USER.encode(),
        PASSWORD.encode(),
    )
    return AuthResult(success=ok, handled=False)  # True: "I replied myself"


@pytest.fixture
def tls_port(recorder: Recorder, authority: trustme.CA) -> Iterator[int]:
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(server_tls)
    with smtp_server(
        recorder,
        tls_context=server_tls,
        require_starttls=True,
        auth_required=True,
        auth_require_tls=True,
        authenticator=authenticate,
    ) as port:
        yield port


def trusting(authority: trustme.CA) -> ssl.SSLContext:
    client = ssl.create_default_context()
    authority.configure_trust(client)
    return client


def test_starttls_and_auth(recorder: Recorder, tls_port: int, authority: trustme.CA) -> None:
    context = plain_context(
        tls_port, smtp_starttls=True, smtp_username=USER, smtp_password=PASSWORD
    )
    outcome = deliver(build(RECEIVER, notice(), context), context, trusting(authority))
    assert outcome.ok, outcome.error
    assert recorder.tls == [True]
    assert recorder.authenticated == [True]
    assert parse(recorder.received[0])["Message-ID"] == "<notice.notice-42@bw.example>"


def test_implicit_tls(recorder: Recorder, authority: trustme.CA) -> None:
    """Port 465's way: TLS from the first byte, no STARTTLS asked for (there is none)."""
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(server_tls)
    with smtp_server(recorder, ssl_context=server_tls) as port:
        context = plain_context(port, smtp_starttls=True, smtp_implicit_tls=True)
        outcome = deliver(build(RECEIVER, notice(), context), context, trusting(authority))
        assert outcome.ok, outcome.error
        untrusted = deliver(build(RECEIVER, notice(), context), context)
        assert "SSLCertVerificationError" in untrusted.error
        plain = replace(context, smtp_implicit_tls=False, smtp_starttls=False)
        assert not deliver(build(RECEIVER, notice(), plain), plain, trusting(authority)).ok
    assert len(recorder.received) == 1


def test_a_wrong_password_is_final(
    recorder: Recorder, tls_port: int, authority: trustme.CA
) -> None:
    context = plain_context(tls_port, smtp_starttls=True, smtp_username=USER, smtp_password="no")
    outcome = deliver(build(RECEIVER, notice(), context), context, trusting(authority))
    assert not outcome.ok
    assert not outcome.retry
    assert outcome.status == 535
    assert not recorder.received


def test_an_untrusted_certificate_is_not_accepted(recorder: Recorder, tls_port: int) -> None:
    """``send`` checks the certificate against the system's CAs, which do not know the test's."""
    context = plain_context(
        tls_port, smtp_starttls=True, smtp_username=USER, smtp_password=PASSWORD
    )
    outcome = send(RECEIVER, notice(), context)
    assert not outcome.ok
    assert "SSLCertVerificationError" in outcome.error
    assert not recorder.received


def test_without_starttls_the_server_that_requires_it_refuses(
    recorder: Recorder, tls_port: int
) -> None:
    outcome = send(RECEIVER, notice(), plain_context(tls_port))
    assert not outcome.ok
    assert outcome.status == 530
    assert not recorder.received


def test_a_digest_charts_its_worst_finding() -> None:
    finding = notice().findings[0]
    group = {"headline": "group <1>", "url": "https://bw.example/alerts/1", "findings": [finding]}
    message = notice(findings=[], groups=[group], event="digest")
    mail = build(RECEIVER, message, plain_context(25))
    html_part = mail.get_body(("html",))
    assert html_part is not None
    assert "group &lt;1&gt;" in html_part.get_content()
    assert [p for p in mail.walk() if p.get_content_type() == "image/png"]


def test_a_history_with_gaps_is_charted() -> None:
    """A failed run's point is null in the payload: a gap in the chart, not a lost chart."""
    finding = {**notice().findings[0], "history": [10.0, None, 10.1, 13.4, None, 13.5]}
    mail = build(RECEIVER, notice(findings=[finding]), plain_context(25))
    (image,) = [p for p in mail.walk() if p.get_content_type() == "image/png"]
    assert decode(image.get_content()).width == 480


@pytest.mark.parametrize("history", [[1.0, "2"], [True, 1.0], "1,2", [1.0]])
def test_a_malformed_history_is_not_charted(history: object) -> None:
    finding = {**notice().findings[0], "history": history}
    mail = build(RECEIVER, notice(findings=[finding]), plain_context(25))
    assert not [p for p in mail.walk() if p.get_content_maintype() == "image"]
