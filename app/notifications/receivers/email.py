"""Email receivers: a notice as a mail through the operator's SMTP server.

The mail is ``multipart/alternative``: the plain text every receiver shows (``text_body``),
and an HTML part with the worst finding's step chart inline (``multipart/related``, the
image named by its Content-ID). Everything in the payload may come from uploads (model
names, hints; a culprit commit's title and author), so the HTML escapes every value and links
only http(s) URLs. A localized notice's author mention, where the subscription asked, is text.

``build`` makes the mail (pure); ``deliver`` sends one over SMTP and says how it went;
``send`` is the receiver (``receivers.Sender``).
"""

import contextlib
import html
import math
import re
import smtplib
import ssl
import time
from collections.abc import Mapping
from datetime import datetime
from email.errors import HeaderParseError
from email.headerregistry import Address
from email.message import EmailMessage
from email.utils import format_datetime
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import Field

from app.core.urls import is_http_url
from app.notifications.message import Message, finding_line, lines_of, mention_of, text_body
from app.notifications.receivers import Outcome, SendContext
from app.notifications.receivers.base import (
    ReceiverBase,
    ReceiverKind,
    as_stored,
    nothing_to_check,
)
from app.notifications.receivers.chart import step_chart_png

NO_SMTP = "no SMTP server configured (BENCHWATCH_SMTP_HOST)"
NO_STARTTLS = "the SMTP server does not offer STARTTLS (BENCHWATCH_SMTP_STARTTLS)"
SUBJECT_LENGTH = 200
ERROR_LENGTH = 300
MAX_HISTORY = 2_000  # points in a chart: more is not a recent history but a payload to refuse
CHART_SIZE = (480, 160)
# Line breaks of every kind, and the other control characters: none belongs in a header.
_CONTROL = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]+")
_ID_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
# Not @, a control character or white space, spelt out: the meaning of \s differs between
# the schema's regex (ECMA 262: U+0085 is not space) and pydantic's (Rust: it is).
_ADDRESS = r"[^@\x00-\x20\x7f-\xa0\u1680\u2000-\u200b\u2028\u2029\u202f\u205f\u3000\ufeff]+"
EMAIL = rf"^{_ADDRESS}@{_ADDRESS}\.{_ADDRESS}$"
Email = Annotated[str, Field(max_length=254, pattern=EMAIL)]


class EmailReceiver(ReceiverBase):
    """Addresses that are mailed each notice (the operator's SMTP server)."""

    kind: Literal["email"]
    to: Annotated[list[Email], Field(min_length=1, max_length=50)]


def one_line(text: str, limit: int) -> str:
    """``text`` on one line (control characters become spaces), cut to ``limit`` characters."""
    flat = " ".join(_CONTROL.sub(" ", text).split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _domain(context: SendContext) -> str:
    """The right-hand side of the ids this service makes: the public host, if it has one."""
    host = urlsplit(context.public_url).hostname if is_http_url(context.public_url) else None
    return _ID_UNSAFE.sub("-", host) if host else "benchwatch.invalid"


def _msg_id(local: str, context: SendContext) -> str:
    return f"<{_ID_UNSAFE.sub('-', local)}@{_domain(context)}>"


def _values(history: object) -> list[float] | None:
    """A finding's ``history`` as floats (null, a failed run, as NaN: a gap); None if not one."""
    if not isinstance(history, list) or not 2 <= len(history) <= MAX_HISTORY:
        return None
    if not all(
        v is None or (isinstance(v, int | float) and not isinstance(v, bool)) for v in history
    ):
        return None
    return [math.nan if v is None else float(v) for v in history]


def _chart_source(message: Message) -> tuple[Mapping[str, Any], list[float], int] | None:
    """The worst finding that carries its history, with that history; None when none does."""
    sections = message.payload.get("groups") or [message.payload]
    for section in sections:
        for finding in section.get("findings") or []:
            values, first_bad = _values(finding.get("history")), finding.get("first_bad_index")
            if (
                values is not None
                and isinstance(first_bad, int)
                and not isinstance(first_bad, bool)
            ):
                return finding, values, first_bad
    return None


def _link(url: object, text: str) -> str:
    """``text`` escaped, as a link when ``url`` is an http(s) URL; plain text otherwise."""
    if isinstance(url, str) and is_http_url(url):
        return f'<a href="{html.escape(url, quote=True)}">{html.escape(text)}</a>'
    return html.escape(text)


def _findings_html(section: Mapping[str, Any]) -> list[str]:
    items = []
    for finding in section.get("findings") or []:
        hints = [str(h) for h in finding.get("hints") or [] if h]
        hint_html = "".join(
            f'<br><span style="color:#5f6b7a">{html.escape(hint)}</span>' for hint in hints
        )
        items.append(f"<li>{_link(finding.get('url'), finding_line(finding))}{hint_html}</li>")
    omitted = section.get("findings_omitted")
    if isinstance(omitted, int) and omitted > 0:
        items.append(f"<li>and {omitted} more</li>")
    return ["<ul>", *items, "</ul>"] if items else []


def _localization_html(told: Mapping[str, Any]) -> list[str]:
    """What a localization found, a line each (links only http(s)); a mention as text."""
    rows = [
        f'<tr><th align="left">{html.escape(line.label)}</th>'
        f"<td>{_link(line.link, line.text)}</td></tr>"
        for line in lines_of(told)
    ]
    if mention := mention_of(told):
        rows.append(f'<tr><th align="left">cc</th><td>{html.escape(mention)}</td></tr>')
    return ["<table>", *rows, "</table>"]


def html_body(message: Message, chart_cid: str | None) -> str:
    """The notice as HTML: every payload value escaped, links only to http(s) URLs.

    Args:
        message: the notice.
        chart_cid: the Content-ID (without angle brackets) of the inline step chart, if any.
    """
    parts = [
        "<!DOCTYPE html>",
        '<html><body style="font-family:sans-serif;font-size:14px;color:#1f2933">',
        f'<p style="font-size:16px;font-weight:bold">{html.escape(message.headline)}</p>',
        f"<p>{_link(message.url, 'Open in benchwatch')}</p>",
    ]
    source = _chart_source(message)
    if chart_cid is not None and source is not None:
        caption = finding_line(source[0])
        parts += [
            f'<p><img src="cid:{html.escape(chart_cid, quote=True)}" width="{CHART_SIZE[0]}"'
            f' height="{CHART_SIZE[1]}" alt="{html.escape(caption, quote=True)}"><br>',
            f'<span style="color:#5f6b7a">{html.escape(caption)}</span></p>',
        ]
    sections = message.payload.get("groups") or [message.payload]
    for section in sections:
        if section is not message.payload:
            title = str(section.get("headline", ""))
            parts.append(f"<h3>{_link(section.get('url'), title)}</h3>")
        if isinstance(told := section.get("localization"), Mapping):
            parts += _localization_html(told)
        parts += _findings_html(section)
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _addresses(receiver: Mapping[str, Any]) -> list[Address]:
    try:
        return [Address(addr_spec=str(addr)) for addr in receiver["to"]]
    except (ValueError, HeaderParseError) as exc:  # defects are ValueErrors too
        raise ValueError(f"not a mail address: {one_line(str(exc), ERROR_LENGTH)}") from exc


def build(receiver: Mapping[str, Any], message: Message, context: SendContext) -> EmailMessage:
    """The mail for one notice: plain text, HTML, and the worst finding's chart inline.

    The Message-ID comes from the notice id, so a mail sent twice (an attempt that timed out
    after the server took it) is one mail to clients that deduplicate; notices of one alert
    group reference the same id, so clients thread them.

    Raises:
        ValueError: an address in ``receiver["to"]`` that is not one.
    """
    mail = EmailMessage()
    mail["Subject"] = one_line(message.headline, SUBJECT_LENGTH)
    mail["From"] = one_line(context.smtp_from, SUBJECT_LENGTH)
    mail["To"] = _addresses(receiver)
    mail["Message-ID"] = _msg_id(f"notice.{message.id}", context)
    group = message.payload.get("group")
    if isinstance(group, Mapping) and isinstance(group.get("id"), int):
        thread = _msg_id(f"alert-group.{group['id']}", context)
        mail["In-Reply-To"] = thread
        mail["References"] = thread
    created_at = message.payload.get("created_at")
    if isinstance(created_at, str):
        with contextlib.suppress(ValueError):  # without one, the server stamps its own
            mail["Date"] = format_datetime(datetime.fromisoformat(created_at))
    mail["Auto-Submitted"] = "auto-generated"  # RFC 3834: no vacation replies to a robot
    mail.set_content(text_body(message))
    source = _chart_source(message)
    chart_cid = _msg_id(f"chart.{message.id}", context) if source is not None else None
    mail.add_alternative(
        html_body(message, chart_cid.strip("<>") if chart_cid else None), subtype="html"
    )
    html_part = mail.get_body(("html",))
    if source is not None and chart_cid is not None and html_part is not None:
        png = step_chart_png(source[1], source[2], *CHART_SIZE)
        # The HTML part becomes multipart/related: the page and the image it shows.
        html_part.add_related(
            png, maintype="image", subtype="png", cid=chart_cid, filename="step-chart.png"
        )
    return mail


def _reply_outcome(code: int, text: bytes | str, started: float) -> Outcome:
    """An SMTP error reply: 4xx is worth another try, 5xx is final."""
    reply = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    return Outcome(
        ok=False,
        status=code,
        latency_ms=_since(started),
        error=one_line(f"SMTP {code} {reply}", ERROR_LENGTH),
        retry=400 <= code < 500,
    )


def _since(started: float) -> float:
    return (time.monotonic() - started) * 1000


def _refused_outcome(refused: Mapping[str, tuple[int, bytes]], started: float) -> Outcome:
    """All recipients refused: retry when any of them was refused for now (4xx)."""
    code = min(code for code, _ in refused.values())
    details = "; ".join(
        f"{addr}: {code} {reply.decode('utf-8', 'replace')}"
        for addr, (code, reply) in refused.items()
    )
    return Outcome(
        ok=False,
        status=code,
        latency_ms=_since(started),
        error=one_line(f"SMTP recipients refused: {details}", ERROR_LENGTH),
        retry=any(400 <= c < 500 for c, _ in refused.values()),
    )


def _transfer(
    mail: EmailMessage, context: SendContext, ssl_context: ssl.SSLContext
) -> dict[str, tuple[int, bytes]]:
    address, timeout = (context.smtp_host, context.smtp_port), context.timeout_s
    smtp = (
        smtplib.SMTP_SSL(*address, timeout=timeout, context=ssl_context)
        if context.smtp_implicit_tls
        else smtplib.SMTP(*address, timeout=timeout)
    )
    with smtp:
        smtp.ehlo()
        if context.smtp_starttls and not context.smtp_implicit_tls:
            # starttls() raises SMTPNotSupportedError when it is not offered: never fall back
            # to sending the password and the mail in the clear.
            smtp.starttls(context=ssl_context)
            smtp.ehlo()
        if context.smtp_username:
            smtp.login(context.smtp_username, context.smtp_password)
        return smtp.send_message(mail, from_addr=context.smtp_from)


def deliver(
    mail: EmailMessage, context: SendContext, ssl_context: ssl.SSLContext | None = None
) -> Outcome:
    """Send ``mail`` to its To addresses through the configured SMTP server.

    TLS from the first byte when ``context.smtp_implicit_tls`` (port 465), else
    STARTTLS when ``context.smtp_starttls`` (a server that does not offer it fails the
    attempt), then AUTH when a username is set. SMTP 4xx replies, connection errors and
    timeouts are retried; 5xx replies are final. When the server takes the mail for some
    recipients and refuses others, the attempt counts as delivered (another would mail the
    first ones twice) and ``error`` names the refused ones.

    Args:
        mail: the message, as ``build`` makes it.
        context: the SMTP settings.
        ssl_context: how to check the server's certificate; the system's trusted CAs when
            None (tests pass one that trusts their own certificate).
    """
    started = time.monotonic()
    if not context.smtp_host:
        return Outcome(ok=False, error=NO_SMTP)
    try:
        refused = _transfer(mail, context, ssl_context or ssl.create_default_context())
    except smtplib.SMTPRecipientsRefused as exc:
        return _refused_outcome(exc.recipients, started)
    except smtplib.SMTPResponseException as exc:  # sender refused, data refused, auth, 421...
        return _reply_outcome(exc.smtp_code, exc.smtp_error, started)
    except smtplib.SMTPNotSupportedError as exc:
        error = NO_STARTTLS if "STARTTLS" in str(exc) else f"SMTP: {exc}"
        return Outcome(ok=False, latency_ms=_since(started), error=one_line(error, ERROR_LENGTH))
    except smtplib.SMTPServerDisconnected as exc:
        return Outcome(
            ok=False, latency_ms=_since(started), error=f"SMTP: disconnected: {exc}", retry=True
        )
    except smtplib.SMTPException as exc:  # no AUTH method in common, and the like: settings
        return Outcome(
            ok=False, latency_ms=_since(started), error=one_line(f"SMTP: {exc}", ERROR_LENGTH)
        )
    except OSError as exc:  # refused, unreachable, timed out, TLS handshake failed
        error = one_line(f"SMTP {type(exc).__name__}: {exc}", ERROR_LENGTH)
        return Outcome(ok=False, latency_ms=_since(started), error=error, retry=True)
    error = ""
    if refused:
        details = "; ".join(f"{addr}: {code}" for addr, (code, _) in refused.items())
        error = one_line(f"delivered; recipients refused: {details}", ERROR_LENGTH)
    return Outcome(ok=True, status=250, latency_ms=_since(started), error=error)


def send(receiver: Mapping[str, Any], message: Message, context: SendContext) -> Outcome:
    """Mail one notice to the receiver's addresses (``receivers.Sender``)."""
    if not context.smtp_host:
        return Outcome(ok=False, error=NO_SMTP)
    try:
        mail = build(receiver, message, context)
    except ValueError as exc:
        return Outcome(ok=False, error=one_line(str(exc), ERROR_LENGTH))
    return deliver(mail, context)


def _where(receiver: Mapping[str, Any]) -> str:
    return ",".join(sorted(receiver["to"]))


# It sends through the operator's SMTP server: shown as it is, nothing for the SSRF guard.
KIND = ReceiverKind(
    "email",
    EmailReceiver,
    send,
    where=_where,
    target=_where,
    masked=as_stored,
    check=nothing_to_check,
)
