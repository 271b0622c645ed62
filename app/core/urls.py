"""Links: the one rule for every URL benchwatch stores or renders.

A stored URL ends up as an ``href`` on a page anyone may open, so only ``http`` and ``https``
with a host are accepted (``javascript:``, ``data:``, ``vbscript:`` and relative or
scheme-relative links are not); templates check again through :func:`safe_href`, so a row
stored before the rule, or restored from elsewhere, still renders as text, not as a link.
"""

from typing import Annotated

from benchwatch_client.text import MAX_URL_LENGTH, is_http_url
from pydantic import AfterValidator, Field

__all__ = ["MAX_URL_LENGTH", "URL_PATTERN", "HttpUrlText", "is_http_url", "safe_href"]


def _http_url(value: str) -> str:
    if value and not is_http_url(value):
        raise ValueError("must be an http(s) URL with a host, e.g. https://ci.example/run/1")
    return value


def safe_href(value: object) -> str | None:
    """``value`` when it may be rendered as a link, else None (the page shows plain text)."""
    return value if isinstance(value, str) and is_http_url(value) else None


# What the OpenAPI schema says a link is: a subset of what is_http_url takes (an IPv6 host or
# an upper-case scheme pass too), so that a link the schema calls valid is never refused.
URL_PATTERN = r"^$|^https?://[A-Za-z0-9._~-]+(:[0-9]{1,5})?([/?#][!-~]*)?$"
# An optional link: empty, or an http(s) URL (422 on anything else).
HttpUrlText = Annotated[
    str,
    Field(max_length=MAX_URL_LENGTH, json_schema_extra={"pattern": URL_PATTERN}),
    AfterValidator(_http_url),
]
