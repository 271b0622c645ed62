"""A subscription's notices as an Atom feed (RFC 4287), for any feed reader.

Built with ``xml.etree``, which escapes every text and attribute: payload fields come from
uploads and cannot break out of the XML. Links are written only when they are http(s).
"""

from collections.abc import Sequence
from datetime import datetime
from xml.etree import ElementTree as ET

from app.core.urls import is_http_url
from app.notifications.message import Message, text_body
from app.notifications.models import Notice, Subscription
from app.notifications.render import iso, notice_id

ATOM = "http://www.w3.org/2005/Atom"
ENTRIES = 50  # the newest notices in the feed


def atom(
    subscription: Subscription, notices: Sequence[Notice], self_url: str, now: datetime
) -> bytes:
    """The feed document: one entry per notice, newest first."""
    ET.register_namespace("", ATOM)
    feed = ET.Element(f"{{{ATOM}}}feed")
    _text(feed, "id", f"urn:benchwatch:subscription:{subscription.id}")
    _text(feed, "title", f"benchwatch: {subscription.name}")
    updated = max((n.sent_at for n in notices if n.sent_at), default=now)
    _text(feed, "updated", iso(updated) or "")
    author = ET.SubElement(feed, f"{{{ATOM}}}author")
    _text(author, "name", subscription.owner or "benchwatch")
    if is_http_url(self_url):
        ET.SubElement(feed, f"{{{ATOM}}}link", rel="self", href=self_url)
    for notice in notices:
        if notice.payload is None:
            continue
        message = Message(notice_id(notice), notice.payload)
        entry = ET.SubElement(feed, f"{{{ATOM}}}entry")
        _text(entry, "id", f"urn:benchwatch:{message.id}")
        _text(entry, "title", message.headline)
        _text(entry, "updated", iso(notice.sent_at or notice.created_at) or "")
        if is_http_url(message.url):
            ET.SubElement(entry, f"{{{ATOM}}}link", rel="alternate", href=message.url)
        ET.SubElement(entry, f"{{{ATOM}}}category", term=message.event)
        _text(entry, "content", text_body(message)).set("type", "text")
    document: bytes = ET.tostring(feed, encoding="utf-8", xml_declaration=True)
    return document


def _text(parent: ET.Element, tag: str, text: str) -> ET.Element:
    element = ET.SubElement(parent, f"{{{ATOM}}}{tag}")
    element.text = text
    return element
