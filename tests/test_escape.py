"""app/core/escape.py: a crafted name is shown as typed in each format, never as markup."""

import re

from app.core import escape

CRAFTED = "@channel [click](https://evil.example) <https://evil.example|click> <!here> <b>x</b>"


def test_markdown_mentions_nobody_and_links_nowhere() -> None:
    written = escape.markdown(CRAFTED)
    assert not re.search(r"(?<!\\)\[[^\]]*(?<!\\)\]\(", written)  # no [text](url) left live
    assert "@channel" not in written  # a zero-width space breaks the mention
    assert "<" not in written.replace("\\<", "")  # every angle bracket backslashed
    assert escape.markdown("resnet50 v2") == "resnet50 v2"


def test_markdown_links_only_http() -> None:
    assert escape.markdown_link("javascript:alert(1)", "x") == "x"
    assert (
        escape.markdown_link("https://ci.example/run/1", "run") == "[run](https://ci.example/run/1)"
    )
    assert ")" not in escape.markdown_link("https://a.example/x)y", "run").split("](")[1][:-1]


def test_slack_leaves_no_control_sequence() -> None:
    written = escape.slack(CRAFTED)
    assert "<" not in written
    assert ">" not in written
    assert "&lt;!here&gt;" in written
    assert escape.slack("a & b") == "a &amp; b"


def test_plotly_text_has_no_live_tag() -> None:
    written = escape.plotly(CRAFTED)
    assert "<" not in written
    assert "&lt;b&gt;x&lt;/b&gt;" in written


def test_plain_mentions_are_broken_for_slack_and_plain_text() -> None:
    for written in (escape.slack("@channel @here @everyone"), escape.unmention("<!here> @x")):
        assert not re.search(r"@(channel|here|everyone|x)|<!", written)
    assert escape.unmention("@here").replace("\u200b", "") == "@here"  # shown the same
