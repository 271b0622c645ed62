"""A notice as receivers send it: the versioned JSON payload, and the text every receiver shows.

The payload is the webhook body, documented in docs/alerts.md ("The payload"); every other
receiver (Slack, email, GitHub issue, the Atom feed, Apprise) renders from it, so they all
say the same thing. Its shape, version 1::

    {
      "version": 1,
      "id": "notice-42",            # the same on every attempt: receivers deduplicate on it
      "event": "opened",            # opened | grew | confirmed | reminder | escalation
                                    # | resolved | test | digest
      "created_at": "2026-12-01T14:00:00Z",
      "headline": "3 regressions on h100-a (nightly): worst +35.2% latency ...",
      "url": "https://benchwatch.example/alerts/7",
      "subscription": {"id": 1, "name": "...", "owner": "...", "revision": 3},
      "group": {                    # null in a digest (see "groups") and a test notice
        "id": 7, "url": "...", "machine": "h100-a", "channel": "nightly", "status": "new",
        "created_at": "...", "findings": 45,
        "last_good_run": {"id": 11, "url": "...", "started_at": "...", "commit": "..."},
        "first_bad_run": {"id": 12, "url": "...", "started_at": "...", "commit": "..."},
        "environment_diff": {"torch": ["2.13.0", "2.14.0.dev20261130"], ...}
      },
      "findings": [                 # those the subscription selects, worst first, at most 20
        {"id": 3, "kind": "regression", "url": "...", "suite": "torchbench",
         "model": "resnet50", "category": "vision", "config": "inductor",
         "precision": "amp", "mode": "inference", "metric": "latency_ms", "unit": "ms",
         "direction": "regression", "before": 10.0, "after": 13.52, "rel_change": 0.352,
         "state": "confirmed", "p_value": 0.0004,  # or "suspected": not yet tested
         "status": "new", "reverted": false, "hints": ["..."],
         "history": [10.1, 9.9, ..., 13.5], "first_bad_index": 24},  # history: worst 3 only
        {"id": 9, "kind": "failure", "severity": "high", "url": "...", "suite": "torchbench",
         "model": "t5", ..., "metric": "latency", "failure": "failed",
         "reason": "CUDA out of memory", "flaky": false, "last_passing_run": {...},
         "first_failing_run": {...}, "passing_again_run_id": null, "status": "new"},
                                    # failures come first; coverage changes last, as
                                    # failures of kind "coverage", severity "low", failure
                                    # "removed" or "added", reason "no longer reported"
      ],
      "findings_omitted": 25,       # selected, but beyond the 20 listed
      "groups": []                  # a digest: one entry per group, each as "group" above
                                    # with its "headline" and "findings"
    }
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

PAYLOAD_VERSION = 1
MAX_FINDINGS = 20  # listed per notice (or per group of a digest); the rest are counted
CHART_FINDINGS = 3  # the worst findings carry their series' recent values
EVENTS = ("opened", "grew", "confirmed", "reminder", "escalation", "resolved", "test", "digest")


@dataclass(frozen=True)
class Message:
    """One notice, ready for a receiver: its stable id and its payload (version 1)."""

    id: str
    payload: Mapping[str, Any]

    @property
    def event(self) -> str:
        """What happened (``EVENTS``)."""
        return str(self.payload["event"])

    @property
    def headline(self) -> str:
        """One line: what happened, where, and the worst of it."""
        return str(self.payload["headline"])

    @property
    def url(self) -> str:
        """Where to look: the alert group's page (the alerts page for a digest or test)."""
        return str(self.payload["url"])

    @property
    def findings(self) -> Sequence[Mapping[str, Any]]:
        """The listed findings, worst first (a digest's are under each of its groups)."""
        return list(self.payload.get("findings") or [])


def percent(rel_change: float) -> str:
    """A relative change as people read it: ``+35.2%``, ``-4.0%``."""
    return f"{rel_change * 100:+.1f}%"


def finding_line(finding: Mapping[str, Any]) -> str:
    """A finding on one line: what, where, how much (every receiver's wording)."""
    case = "/".join(
        str(finding[field])
        for field in ("suite", "model", "config", "precision", "mode")
        if finding.get(field)
    )
    if finding.get("kind") == "machine_silent":
        where = f"{finding.get('machine', '')} ({finding.get('channel', '')})"
        return f"machine silent: {where}, no run since {finding.get('silent_since', '')}"
    if finding.get("kind") == "failure":
        flaky = " (flaky)" if finding.get("flaky") else ""
        return f"failure{flaky} {case}: {finding.get('reason', '')}".strip()
    if finding.get("kind") == "coverage":
        return f"coverage {case}: {finding.get('reason', '')}".strip()
    change = percent(float(finding.get("rel_change") or 0.0))
    before, after = finding.get("before"), finding.get("after")
    values = f" ({before:.4g} -> {after:.4g})" if before is not None and after is not None else ""
    line = f"{finding['kind']} {change} {finding.get('metric', '')} {case}{values}".strip()
    return line + state_words(finding)


def state_words(finding: Mapping[str, Any]) -> str:
    """Whether a step is suspected or confirmed, and its p-value: ``, suspected (p=0.031)``.

    A suspected step rests on the newest point or two, before the change-point test has
    judged it: a reader must be able to tell it from a confirmed one. Nothing for a finding
    with no state (a failure, an aggregate, a payload from before states were sent).
    """
    state = finding.get("state")
    if state not in ("suspected", "confirmed"):
        return ""
    p_value = finding.get("p_value")
    shown = f" (p={p_value:.2g})" if isinstance(p_value, int | float) else ""
    return f", {state}{shown}"


def text_body(message: Message) -> str:
    """The notice as plain text: headline, link, one line per finding, what was left out."""
    lines = [message.headline, message.url, ""]
    sections = message.payload.get("groups") or [message.payload]
    for section in sections:
        if section is not message.payload:
            lines += [str(section.get("headline", "")), str(section.get("url", ""))]
        lines += [f"- {finding_line(f)}" for f in section.get("findings") or []]
        if omitted := section.get("findings_omitted"):
            lines.append(f"- and {omitted} more")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def test_message(
    notice_id: str, subscription: Mapping[str, Any], public_url: str, created_at: str
) -> Message:
    """The "send a test notice" message: a made-up finding, marked as a test everywhere.

    ``subscription``: its ``id``, ``name``, ``owner`` and ``revision``.
    """
    url = f"{public_url.rstrip('/')}/alerts"
    history = [10.0, 10.1, 9.9, 10.0, 10.05, 13.4, 13.5, 13.45]
    finding = {
        "id": 0,
        "kind": "regression",
        "url": url,
        "suite": "test",
        "model": "test-notice",
        "category": "",
        "config": "inductor",
        "precision": "amp",
        "mode": "inference",
        "metric": "latency_ms",
        "unit": "ms",
        "direction": "regression",
        "before": 10.0,
        "after": 13.45,
        "rel_change": 0.345,
        "state": "confirmed",
        "p_value": 0.001,
        "status": "new",
        "reverted": False,
        "hints": ["a test notice: nothing regressed"],
        "history": history,
        "first_bad_index": 5,
    }
    return Message(
        notice_id,
        {
            "version": PAYLOAD_VERSION,
            "id": notice_id,
            "event": "test",
            "created_at": created_at,
            "headline": f"Test notice for subscription {subscription['name']!r}: nothing regressed",
            "url": url,
            "subscription": dict(subscription),
            "group": None,
            "findings": [finding],
            "findings_omitted": 0,
            "groups": [],
        },
    )
