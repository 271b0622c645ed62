"""The copy-paste receiver of docs/alerts.md verifies what the webhook receiver signs."""

import re
import time
from pathlib import Path
from typing import Any

import pytest

from app.notifications.message import test_message as sample_message
from app.notifications.receivers.webhook import body_of, signed_headers
from app.notifications.targets import new_secret

DOCS = Path(__file__).resolve().parents[2] / "docs" / "alerts.md"


def documented_receiver(secret: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    (code,) = re.findall(r"```python\n(# receiver\.py.*?)```", DOCS.read_text(), re.DOTALL)
    monkeypatch.setenv("BW_SECRET", secret)
    namespace: dict[str, Any] = {"__name__": "docs_receiver"}
    exec(compile(code, "docs/alerts.md", "exec"), namespace)
    return namespace


def test_the_documented_receiver_verifies_a_signed_notice(monkeypatch: pytest.MonkeyPatch) -> None:
    old, new = new_secret(), new_secret()
    message = sample_message(
        "notice-7",
        {"id": 1, "name": "s", "owner": "", "revision": 1},
        "https://bw.example",
        "2026-12-01T00:00:00Z",
    )
    body = body_of(message)
    headers = signed_headers([new, old], message.id, int(time.time()), body)
    for secret in (old, new):  # rotation: either secret verifies
        assert documented_receiver(secret, monkeypatch)["verified"](headers, body)
    verified = documented_receiver(new, monkeypatch)["verified"]
    assert not verified(headers, body.replace(b"nothing regressed", b"all is well!!!!!"))
    stale = signed_headers([new], message.id, int(time.time()) - 3600, body)
    assert not verified(stale, body)
    assert not documented_receiver(new_secret(), monkeypatch)["verified"](headers, body)
