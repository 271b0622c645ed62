"""Stored strings escaped for where they are written: one home for every receiver and chart.

Names reach receivers and charts from uploads and URLs, so each sink escapes them for its own
format where it writes them, never once at upload time for all formats (docs/security.md).
HTML pages need nothing here: Jinja autoescapes them; webhooks are JSON.
"""

import html

from benchwatch_client.text import markdown, markdown_link, unmention

__all__ = ["markdown", "markdown_link", "plotly", "slack", "unmention"]


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
