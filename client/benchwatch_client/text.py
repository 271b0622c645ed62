"""What the client and the server agree on about text: which links are links, and Markdown.

One home for both ends: the server (``app.core.urls``, ``app.core.escape``) imports these, so
the URL a client infers from CI is the URL the server accepts, and a gate report the client
writes escapes names as the server's Markdown receivers do.
"""

import re
from urllib.parse import quote, urlsplit

MAX_URL_LENGTH = 2_000

_PUNCTUATION = re.compile(r"([\\`*_{}\[\]<>()#+\-.!|~&:=\"'$%^])")


def is_http_url(value: str) -> bool:
    """Whether ``value`` is an absolute http(s) URL with a host and no control characters."""
    if not value or len(value) > MAX_URL_LENGTH or any(ord(c) < 0x21 or c == "\x7f" for c in value):
        return False
    try:
        parts = urlsplit(value)
    except ValueError:  # an unbalanced [ in the host
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def markdown(text: object) -> str:
    """``text`` as Markdown that shows it as it is, on one line.

    Every ASCII punctuation character that Markdown (or HTML inside it) could read is
    backslash-escaped (CommonMark: any ASCII punctuation may be), and a zero-width space
    follows each ``@`` so that a crafted name mentions nobody (``@org/team``, ``@channel``).
    """
    flat = " ".join(str(text).split())
    return unmention(_PUNCTUATION.sub(r"\\\1", flat))


def unmention(text: str) -> str:
    """``text`` with a zero-width space after each ``@`` and ``<!``: shown the same, pings nobody.

    For every sink whose reader may turn ``@name`` (``@channel``, ``@here``, ``@org/team``)
    or Slack's ``<!channel>`` into a ping, plain text ones included (a Slack header, an
    issue title).
    """
    return text.replace("@", "@\u200b").replace("<!", "<\u200b!")


def markdown_link(url: object, text: str) -> str:
    """``text`` escaped, as a link when ``url`` is http(s); otherwise the text alone."""
    if isinstance(url, str) and is_http_url(url):
        # Percent-encoding what could end the destination early: ( ) < > and quotes.
        target = quote(url, safe=":/?#[]@!$&*+,;=%~-._")
        return f"[{markdown(text)}]({target})"
    return markdown(text)
