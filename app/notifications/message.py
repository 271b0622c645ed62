"""A notice as receivers send it: the versioned JSON payload, and the text every receiver shows.

The payload is the webhook body, documented in docs/alerts.md ("The payload"); every other
receiver (Slack, email, GitHub issue, the Atom feed, Apprise) renders from it, so they all
say the same thing. Its shape, version 1::

    {
      "version": 1,
      "id": "notice-42",            # the same on every attempt: receivers deduplicate on it
      "event": "opened",            # opened | grew | confirmed | reminder | escalation
                                    # | resolved | localized | test | digest
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
         "status": "new", "reverted": false, "hints": ["..."],  # "kernels: ..." ends the line
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
      "groups": [],                 # a digest: one entry per group, each as "group" above
                                    # with its "headline" and "findings" (and a localized
                                    # notice's "localization")
      "localization": {             # a localized notice only; "url" above is its page
        "id": 5, "url": "https://benchwatch.example/localizations/5",
        "state": "culprit_found",   # | not_reproduced | inconclusive | failed
        "reason": "...", "strategy": "commit_bisection",
        "finding": {"kind": "regression", "id": 3}, "machine": "h100-a",
        "case": {"suite": "torchbench", "model": "resnet50", ..., "metric": "latency"},
        "culprit": {"kind": "commit", "component": "torch", "commit": "1a2b...",
                    "title": "...", "author": "Jane Doe", "link": "https://..."},
                                    # or kind component / commit_range / setting; null
        "mention": "@jane",         # the subscription asked (mention_author) and the
                                    # culprit carries a GitHub login; else null
        "probes": 9, "repeats": 2, "builds": 6, "samples": 130,
        "started_by": "auto", "finished_at": "2026-12-01T18:00:00Z"
      }
    }
"""

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.anomalies.explain import kernels_line
from app.core.urls import is_http_url

PAYLOAD_VERSION = 1
MAX_FINDINGS = 20  # listed per notice (or per group of a digest); the rest are counted
CHART_FINDINGS = 3  # the worst findings carry their series' recent values
EVENTS = (
    "opened",
    "grew",
    "confirmed",
    "reminder",
    "escalation",
    "resolved",
    "localized",
    "test",
    "digest",
)
LOCALIZED = "localized"
STATE_WORDS = {
    "culprit_found": "culprit found",
    "not_reproduced": "not reproduced",
    "inconclusive": "inconclusive",
    "failed": "failed",
}
SHORT_SHA = 12  # characters of a commit's id, as the localization page shows it
TITLE_CHARS = 200  # of a commit's title in a notice
REASON_CHARS = 300  # of a localization's reason in a notice
# A GitHub login: letters, digits and single inner hyphens, at most 39 characters.
GITHUB_LOGIN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38}")


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
    kernels = kernels_line(finding.get("hints") or [])
    return line + state_words(finding) + (f"; {kernels}" if kernels else "")


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
    """The notice as plain text: headline, link, one line per finding, what was left out.

    A localized notice (or its section of a digest) tells the localization first, with the
    author's GitHub login as plain text where the subscription asked for it.
    """
    lines = [message.headline, message.url, ""]
    sections = message.payload.get("groups") or [message.payload]
    for section in sections:
        if section is not message.payload:
            lines += [str(section.get("headline", "")), str(section.get("url", ""))]
        if isinstance(told := section.get("localization"), Mapping):
            for line in lines_of(told):
                shown = line.suffix() if line.link != message.url else ""  # said above
                lines.append(f"{line.label}: {line.text}{shown}")
            if mention := mention_of(told):
                lines.append(f"cc {mention}")
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


@dataclass(frozen=True)
class Line:
    """One line of what a localization found: a label, its text, and a link for the text.

    ``link`` is None unless it is an http(s) URL (``is_http_url``): a receiver links only it.
    """

    label: str
    text: str
    link: str | None = None

    def suffix(self) -> str:
        """The link as plain text puts it after the text (nothing without one)."""
        return f" <{self.link}>" if self.link else ""


def _http(value: object) -> str | None:
    return value if isinstance(value, str) and is_http_url(value) else None


def _value(value: object) -> str:
    """A setting's or version's value as people read it: JSON, so that none and "" differ."""
    return value if isinstance(value, str) else json.dumps(value)


def _pairs(pairs: object) -> str:
    """``{"torch": ["2.5", "2.6"]}`` as ``torch 2.5 -> 2.6``; several joined by ``; ``."""
    if not isinstance(pairs, Mapping):
        return ""
    shown = []
    for name, pair in pairs.items():
        good, bad = pair if isinstance(pair, list | tuple) and len(pair) == 2 else (None, None)
        shown.append(f"{name} {_value(good)} -> {_value(bad)}")
    return "; ".join(shown)


def short_sha(commit: object) -> str:
    """A commit's id cut to ``SHORT_SHA`` characters."""
    return str(commit or "")[:SHORT_SHA]


def culprit_text(culprit: Mapping[str, Any]) -> str:
    """A culprit in one line, by its kind.

    A component's versions, a commit with its title and author, a range of commits that do
    not build, compiler settings good -> bad; any other kind as its fields.
    """
    kind = culprit.get("kind")
    component = str(culprit.get("component") or "")
    if kind == "component":
        together = " (only together)" if len(culprit.get("versions") or {}) > 1 else ""
        return f"component {_pairs(culprit.get('versions'))}{together}"
    if kind == "commit":
        title = " ".join(str(culprit.get("title") or "").split())[:TITLE_CHARS]
        author = str(culprit.get("author") or "")
        text = f"{component} commit {short_sha(culprit.get('commit'))}"
        return text + (f' "{title}"' if title else "") + (f" by {author}" if author else "")
    if kind == "commit_range":
        commits = [short_sha(c) for c in culprit.get("commits") or []]
        listed = ", ".join(commits[:5]) + (", ..." if len(commits) > 5 else "")
        text = f"{component}: one of {len(commits)} commits that do not build ({listed})"
        if culprit.get("good_commit") and culprit.get("bad_commit"):
            good, bad = short_sha(culprit["good_commit"]), short_sha(culprit["bad_commit"])
            text += f", between {good} and {bad}"
        return text
    if kind == "setting":
        plural = "s" if len(culprit.get("values") or {}) > 1 else ""
        return f"compiler setting{plural} {_pairs(culprit.get('values'))}"
    fields = "; ".join(f"{k}: {_value(v)}" for k, v in culprit.items() if k != "kind")
    return f"{kind}: {fields}" if fields else str(kind)


def case_text(told: Mapping[str, Any]) -> str:
    """The localized finding: its kind, case, metric and change, and machine."""
    case = told.get("case") if isinstance(told.get("case"), Mapping) else {}
    assert isinstance(case, Mapping)
    finding = told.get("finding") if isinstance(told.get("finding"), Mapping) else {}
    assert isinstance(finding, Mapping)
    where = "/".join(
        str(case[field])
        for field in ("suite", "model", "config", "precision", "mode")
        if case.get(field)
    )
    change = case.get("rel_change")
    size = f" {percent(float(change))}" if isinstance(change, int | float) else ""
    metric = f" {case['metric']}" if case.get("metric") else ""
    return f"{finding.get('kind', 'finding')} {where}{metric}{size} on {told.get('machine', '')}"


def lines_of(told: Mapping[str, Any]) -> list[Line]:
    """What a localized notice says, line by line (``told``: the payload's localization)."""
    state = STATE_WORDS.get(str(told.get("state")), str(told.get("state", "")))
    strategy = str(told.get("strategy") or "").replace("_", " ")
    lines = [
        Line(
            "Localization", state + (f" ({strategy})" if strategy else ""), _http(told.get("url"))
        ),
        Line("Finding", case_text(told)),
    ]
    if isinstance(culprit := told.get("culprit"), Mapping):
        lines.append(Line("Culprit", culprit_text(culprit), _http(culprit.get("link"))))
    costs = (("probes", "probes"), ("repeats", "repeats"), ("builds", "builds"))
    cost = ", ".join(f"{told.get(key) or 0} {word}" for key, word in costs)
    lines.append(Line("Cost", f"{cost}, {told.get('samples') or 0} samples"))
    if reason := " ".join(str(told.get("reason") or "").split()):
        lines.append(Line("Why", reason[:REASON_CHARS]))
    return lines


def github_login(value: object) -> str | None:
    """``value`` when it is a GitHub login (``GITHUB_LOGIN``), else None."""
    return value if isinstance(value, str) and GITHUB_LOGIN.fullmatch(value) else None


def mention_of(told: Mapping[str, Any]) -> str | None:
    """The payload's ``@login`` when it is one (checked again: receivers write it as is)."""
    mention = told.get("mention")
    if isinstance(mention, str) and mention.startswith("@") and github_login(mention[1:]):
        return mention
    return None


def localized_headline(told: Mapping[str, Any], channel: str) -> str:
    """``Localized (culprit found): resnet50 latency on h100-a (nightly): torch commit ...``."""
    state = STATE_WORDS.get(str(told.get("state")), str(told.get("state", "")))
    case = told.get("case") if isinstance(told.get("case"), Mapping) else {}
    assert isinstance(case, Mapping)
    what = " ".join(str(case[field]) for field in ("model", "metric") if case.get(field))
    text = f"Localized ({state}): {what} on {told.get('machine', '')} ({channel})"
    if isinstance(culprit := told.get("culprit"), Mapping):
        text += f": {culprit_text(culprit)[:120]}"
    return text
