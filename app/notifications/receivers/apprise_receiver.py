"""Apprise receivers: Microsoft Teams, Discord, Mattermost and more, through Apprise.

Only the URL schemes the operator lists (``BENCHWATCH_APPRISE_SCHEMES``) may be used. Apprise
is imported inside ``send`` only: it loads some 260 plugins, and the API process, which checks
these URLs when a subscription is made (``check_scheme``, ``check_host``), never sends one.

The SSRF guard: a scheme whose URL names the host Apprise will contact (Mattermost, the
generic ``json://``, Power Automate ``workflows://``, and any scheme this module does not know)
has that host checked by ``guard.check_target`` at creation and before each delivery, and
Apprise's own lookups of it then answer with the checked addresses only
(``guard.lookups_pinned``): a name whose answer changes between the check and the request
gains nothing. Schemes that always post to their vendor's host (``FIXED_HOST_SCHEMES``) are
not checked. Apprise is made to follow no redirect (whatever the URL says) and to try once
(the delivery job retries, with its backoff).
"""

import contextlib
import logging
import re
import time
from collections.abc import Iterator, Mapping
from typing import Annotated, Any, Literal
from urllib.parse import parse_qsl, urlsplit

from pydantic import Field

from app.core.escape import markdown as escape_markdown
from app.notifications import guard, outbound
from app.notifications.message import Message
from app.notifications.receivers import Outcome, SendContext
from app.notifications.receivers.base import MASK, ReceiverBase, ReceiverKind
from app.notifications.receivers.github_issue import markdown_body

# Schemes whose plugin posts to a fixed vendor host, whatever the URL's "host" part holds
# (read in Apprise's plugins): discord -> https://discord.com/api/webhooks/<id>/<token>;
# msteams (Apprise 1.x; Microsoft retired its connectors, Apprise 2 has no such scheme) ->
# https://<team>.webhook.office.com/...
FIXED_HOST_SCHEMES = frozenset({"discord", "msteams"})
TITLE_CHARS = 250  # Apprise's default title limit
ERROR_CHARS = 300
# Query parameters through which an Apprise plugin reads the host it contacts, in place of
# the URL's host part that the guard checks (irc's ?host=; others take a server or URL):
# refused for any scheme whose host the guard checks.
HOST_PARAMETERS = frozenset(
    {"host", "hostname", "server", "domain", "url", "base_url", "baseurl", "endpoint"}
)
# Apprise reads ?verify= with parse_bool: these turn certificate checks off.
_FALSE = frozenset({"no", "false", "0", "off", "n", "f", "never", "disable", "disabled"})
_HOST = re.compile(r"[A-Za-z0-9_.-]{1,253}|[0-9A-Fa-f:.]{2,45}")
AppriseUrl = Annotated[
    str, Field(min_length=4, max_length=2_000, pattern=r"^[a-z0-9]+://[^\x00]*$")
]


class AppriseReceiver(ReceiverBase):
    """Teams, Discord, Mattermost and others through Apprise: a URL of an allowed scheme."""

    kind: Literal["apprise"]
    url: AppriseUrl


def scheme_of(url: str) -> str:
    """The URL's scheme in lower case (``mmost`` of ``mmost://host/token``); empty if none."""
    scheme, separator, _ = url.partition("://")
    return scheme.lower() if separator else ""


def schemes_of(schemes: str) -> frozenset[str]:
    """``BENCHWATCH_APPRISE_SCHEMES`` as a set: comma-separated, spaces and case ignored."""
    return frozenset(s.strip().lower() for s in schemes.split(",") if s.strip())


def check_scheme(url: str, schemes: str) -> None:
    """Refuse an Apprise URL whose scheme the operator does not allow.

    Args:
        url: the receiver's Apprise URL.
        schemes: the allowed schemes, comma-separated (``SendContext.apprise_schemes``).

    Raises:
        ValueError: the scheme is not allowed (the message lists those that are).
    """
    allowed = schemes_of(schemes)
    scheme = scheme_of(url)
    if scheme not in allowed:
        listed = ", ".join(f"{s}://" for s in sorted(allowed)) or "none"
        raise ValueError(
            f"{scheme or 'this'}:// URLs are not allowed here; the operator allows {listed}"
            " (BENCHWATCH_APPRISE_SCHEMES)"
        )


def check_query(url: str) -> None:
    """Refuse an Apprise URL that turns TLS verification off or takes its host from the query.

    ``?verify=no`` lets anyone on the path read and change the notice (and the token in the
    URL); a host taken from a query parameter is not the one the SSRF guard checked.

    Raises:
        ValueError: naming the parameter.
    """
    try:
        query = parse_qsl(urlsplit(url).query, keep_blank_values=True)
    except ValueError:
        raise ValueError("not a valid URL (check the query)") from None
    checks_host = scheme_of(url) not in FIXED_HOST_SCHEMES
    for name, value in query:
        key = name.strip().lower()
        if key == "verify" and value.strip().lower() in _FALSE:
            raise ValueError("?verify= may not turn TLS certificate checks off")
        if checks_host and key in HOST_PARAMETERS:
            raise ValueError(f"?{key}= may not name the host (the URL's host part is checked)")


def _check_host_name(host: str | None, allow: guard.AllowList) -> list[guard.Address]:
    """Run the SSRF guard on the host Apprise will contact; its checked addresses.

    Raises:
        guard.Refused: not a plain host name or address, or one the guard refuses.
    """
    bare = (host or "").removeprefix("[").removesuffix("]")
    if not _HOST.fullmatch(bare):
        raise guard.Refused(f"the Apprise URL's host {host!r} is not a host name or an IP address")
    return guard.check_target(f"https://[{bare}]/" if ":" in bare else f"https://{bare}/", allow)


def check_host(url: str, allow: guard.AllowList) -> None:
    """Refuse an Apprise URL whose host the SSRF guard refuses (when a subscription is made).

    This reads the URL as a URL; delivery checks again the host that Apprise itself reads
    from it. A URL whose host part has two ``@`` (read differently by different parsers)
    is refused.

    Raises:
        ValueError: the host is refused (``guard.Refused``), or the URL cannot be read.
    """
    if scheme_of(url) in FIXED_HOST_SCHEMES:
        return
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        raise ValueError("not a valid URL (check the host and the port)") from None
    if parts.netloc.count("@") > 1:
        raise ValueError("the URL's host part holds more than one @")
    _check_host_name(host, allow)


def _guard(
    scheme: str, host: object, allow: guard.AllowList, started: float
) -> Outcome | list[guard.Address]:
    """The outcome of a refused host, or the addresses Apprise may connect to (none to pin)."""
    if scheme in FIXED_HOST_SCHEMES:
        return []
    try:
        return _check_host_name(host if isinstance(host, str) else None, allow)
    except guard.Refused as exc:
        # A failed lookup is often brief: check_target reports it as a refusal, raised
        # while handling the DeliveryError.
        lookup_failed = isinstance(exc.__context__, guard.DeliveryError)
        outcome = outbound.failed(exc, started)
        return Outcome(
            ok=False, latency_ms=outcome.latency_ms, error=outcome.error, retry=lookup_failed
        )


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _title(headline: str) -> str:
    """The headline as a Markdown title, escaped as the body is, cut without a dangling backslash.

    Mattermost, Teams and Slack-like services render the title as Markdown, and the headline
    carries uploaded names (a model ``@channel``, a failure reason with a link).
    """
    escaped = escape_markdown(_one_line(headline, TITLE_CHARS))
    if len(escaped) <= TITLE_CHARS:
        return escaped
    return escaped[: TITLE_CHARS - 1].rstrip("\\") + "…"


_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")


def _secrets_of(url: str) -> list[str]:
    """The parts of an Apprise URL that may be credentials.

    The user, the password, each path segment and each query value: tokens live in any of
    them, by scheme.
    """
    try:
        parts = urlsplit(url)
        found = [parts.username or "", parts.password or ""]
    except ValueError:
        return [url]
    found += parts.path.split("/")
    found += [value for _, value in parse_qsl(parts.query, keep_blank_values=True)]
    # Longest first, so that a token is not left half-replaced by a shorter part of it.
    return sorted({s for s in found if len(s) >= 3}, key=len, reverse=True)


def redact(text: str, url: str) -> str:
    """``text`` with every URL and every credential-like part of ``url`` replaced by ``…``.

    Apprise logs the URL it posts to (``http://host/hooks/<token>``), and a plugin's error
    quotes it: neither may reach the log or a stored delivery error.
    """
    text = _URL.sub(lambda m: m.group(0).split("://", 1)[0] + "://…", text)
    for secret in _secrets_of(url):
        text = text.replace(secret, "…")
    return text


class _Redacting(logging.Filter):
    """Redacts each record the ``apprise`` logger makes while one URL is being sent."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact(record.getMessage(), self.url)
        record.args = None
        return True


class _LastWarning(logging.Handler):
    """Keeps the last warning Apprise logs: its one word on why a notice failed."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.last = ""

    def emit(self, record: logging.LogRecord) -> None:
        self.last = record.getMessage()


def _proxy_for(url: str) -> str:
    """Why a proxy in the environment would carry this URL's request; empty if none would.

    Apprise posts through requests, which honours ``HTTP(S)_PROXY``: the proxy would look the
    host up itself, past the checked addresses ``lookups_pinned`` holds it to. So a checked
    host is sent to only where no proxy applies (``NO_PROXY`` may name it).
    """
    import requests.utils

    target = f"https://{urlsplit(url).hostname or ''}/"
    proxies = requests.utils.get_environ_proxies(target) or {}
    used = {k: v for k, v in proxies.items() if k in ("https", "http", "all") and v}
    if not used:
        return ""
    return (
        "a proxy in the environment (HTTP_PROXY/HTTPS_PROXY/ALL_PROXY) would carry this"
        " notice and look its host up past the SSRF guard: name the host in NO_PROXY"
    )


@contextlib.contextmanager
def _log_redacted(url: str) -> Iterator[None]:
    """Every record the ``apprise`` logger makes meanwhile has ``url``'s credentials redacted."""
    redacting = _Redacting(url)
    apprise_log = logging.getLogger("apprise")
    apprise_log.addFilter(redacting)
    try:
        yield
    finally:
        apprise_log.removeFilter(redacting)


def _notify(plugin: Any, asset: Any, message: Message) -> tuple[bool, str]:
    """Send through Apprise; whether it went, and the last thing Apprise warned about."""
    import apprise

    notifier = apprise.Apprise(asset=asset)
    notifier.add(plugin)
    warning = _LastWarning()
    apprise_log = logging.getLogger("apprise")
    apprise_log.addHandler(warning)
    try:
        sent = notifier.notify(
            body=markdown_body(message),
            title=_title(message.headline),
            body_format=apprise.NotifyFormat.MARKDOWN,
        )
    finally:
        apprise_log.removeHandler(warning)
    return bool(sent), warning.last


def send(receiver: Mapping[str, Any], message: Message, context: SendContext) -> Outcome:
    """Notify through Apprise: the headline as title, the findings as Markdown.

    Apprise says only whether it worked; a failure is retried, since most are a service
    that is down or busy (a wrong token fails each time, until the retries run out).
    """
    with _log_redacted(str(receiver["url"])):
        return _send(receiver, message, context)


def _send(receiver: Mapping[str, Any], message: Message, context: SendContext) -> Outcome:
    started = time.monotonic()
    url = str(receiver["url"])
    scheme = scheme_of(url)
    try:
        check_scheme(url, context.apprise_schemes)
        check_query(url)
    except ValueError as exc:
        return Outcome(ok=False, error=str(exc))
    try:
        allow = guard.AllowList.parse(context.receiver_allow)
    except ValueError as exc:  # the operator's to fix; the notice waits for it
        return Outcome(ok=False, error=str(exc), retry=True)

    import apprise  # here, not at the top: only delivery jobs load Apprise

    asset = apprise.AppriseAsset(storage_mode="memory", async_mode=False, http_redirects=False)
    plugin = apprise.Apprise.instantiate(url, asset=asset)
    if plugin is None:
        return Outcome(ok=False, error=f"Apprise cannot read this {scheme}:// URL")
    host = getattr(plugin, "host", None)
    checked = _guard(scheme, host, allow, started)
    if isinstance(checked, Outcome):
        return checked
    if checked and (proxy := _proxy_for(url)):
        return Outcome(ok=False, error=proxy, retry=True)
    # Whatever the URL asked for (?redirect=yes, ?retry=9, ?rto=600): a redirect could lead
    # past the guard, and retries and time belong to the delivery job.
    plugin.redirects = False
    plugin.retry = 0
    plugin.socket_connect_timeout = plugin.socket_read_timeout = context.timeout_s
    pinned = (
        guard.lookups_pinned(host, checked)
        if checked and isinstance(host, str)
        else contextlib.nullcontext()
    )
    try:
        with pinned:
            sent, warning = _notify(plugin, asset, message)
    except Exception as exc:  # a bug in one of Apprise's plugins fails the attempt, not the job
        sent, warning = False, redact(f"{type(exc).__name__}: {exc}", url)
    latency_ms = (time.monotonic() - started) * 1000
    if sent:
        return Outcome(ok=True, latency_ms=latency_ms)
    error = _one_line(f"Apprise: {warning or 'the notice was not delivered'}", ERROR_CHARS)
    return Outcome(ok=False, latency_ms=latency_ms, error=error, retry=True)


def masked(receiver: Mapping[str, Any]) -> dict[str, Any]:
    """An Apprise receiver as reads show it: its URL's scheme only (some hold a token as host)."""
    return {**receiver, "url": f"{urlsplit(str(receiver['url'])).scheme}://{MASK}"}


def check(receiver: Mapping[str, Any], allow: guard.AllowList, apprise_schemes: str) -> None:
    """Refuse an Apprise URL its ``send`` would refuse, when receivers are made or changed.

    That is a scheme the operator does not allow, a query that turns TLS off or names the
    host (``check_query``), or a host the SSRF guard refuses (``check_host``).

    Raises:
        ValueError: why, in a sentence for the URL's author.
    """
    url = str(receiver["url"])
    check_scheme(url, apprise_schemes)
    check_query(url)
    check_host(url, allow)


# Shown in the log by its host (the default); read back by its scheme only; checked as above.
KIND = ReceiverKind("apprise", AppriseReceiver, send, masked=masked, check=check)
