"""Stored strings escaped for where they are written: one home for every receiver and chart.

Names reach receivers and charts from uploads and URLs, so each sink escapes them for its own
format where it writes them, never once at upload time for all formats (docs/security.md).
HTML pages need nothing here: Jinja autoescapes them; webhooks are JSON.
"""

import html
import re
from urllib.parse import quote

from app.core.urls import is_http_url

_PUNCTUATION = re.compile(r"([\\`*_{}\[\]<>()#+\-.!|~&:=\"'$%^])")


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


def slack(text: str) -> str:
    """``text`` for Slack's mrkdwn: its three control characters as entities, mentions broken.

    With ``<`` escaped no ``<!channel>`` or ``<url|text>`` can be written; a plain
    ``@channel`` is read as a mention where a message asks Slack to parse names
    (``link_names``), so it gets ``unmention``'s zero-width space too.
    """
    entities = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return unmention(entities)


def plotly(value: object) -> str:
    """A string as figure text: drawn as typed, never as Plotly markup.

    Plotly reads an HTML subset (``<a href>``, ``<b>``, ``<br>``) in titles, trace names,
    hover text and annotations, and these strings come from URLs and uploads (a
    ``/compare?base_config=<a href=...>`` drew an off-site link in the title); the ``<br>``
    a figure adds itself stays markup.
    """
    return html.escape(str(value), quote=False)
