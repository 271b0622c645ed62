"""Which findings a subscription's rules select: pure, compiled once, linear in the rules.

A rule set maps field names to what they accept (``RULE_FIELDS``): a text field takes one
value or a list of values (any of them), each an ``fnmatch`` glob (``*``, ``?``, ``[...]``),
case-sensitive, so a value without those characters is an exact match; ``direction``,
``kind`` and ``state`` take one value or a list; ``min_rel_change`` the least absolute
relative change (a fraction: 0.05 is 5%). An absent field accepts anything, so the empty rule
set matches every finding, with one exception: a ``match`` rule set without ``state`` selects
confirmed findings only (``DEFAULT_STATES``); a subscription asks for suspected steps by
naming them. A subscription selects a finding when its ``match`` rule set holds and none
of its ``exclude`` rule sets holds in full.

Rule sets come from the database as validated JSON (``schemas.Rules``); matching does no
validation and no I/O. ``compile_rules`` turns a rule set into a short list of checks (a
frozenset lookup for exact values, one regular expression for a field's globs), so checking
a finding costs a few attribute reads per field that the rule set names.
"""

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import translate
from functools import lru_cache
from typing import Any

TEXT_FIELDS = (
    "machine",
    "channel",
    "project",
    "suite",
    "model",
    "category",
    "config",
    "precision",
    "mode",
    "metric",
)
CHOICE_FIELDS = ("direction", "kind", "state")
DEFAULT_STATES = ("confirmed",)  # what a match rule set without ``state`` selects
RULE_FIELDS = (*TEXT_FIELDS, *CHOICE_FIELDS, "min_rel_change")
GLOB_CHARACTERS = frozenset("*?[")


@dataclass(frozen=True, slots=True)
class Finding:
    """What a notice is about, as rules see it: a step in one series, or a machine's silence.

    ``kind``: ``regression``, ``improvement``, ``failure``, ``coverage`` (a case removed or
    added), ``machine_silent`` or ``aggregate`` (a dashboard aggregate of a group of models;
    its ``metric`` is the aggregate: ``pass_rate``, ``geomean_speedup``, ...);
    ``direction``: ``regression``, ``improvement`` or ``change`` (a metric with no good
    direction); ``rel_change``: the relative change, signed (0 where there is none);
    ``state``: ``suspected`` for a step reported before the test confirmed it (or one that was
    suspected and withdrawn), else ``confirmed``.
    """

    kind: str
    machine: str
    channel: str = ""
    project: str = ""  # its run's project (a machine's silence has none)
    suite: str = ""
    model: str = ""
    category: str = ""
    config: str = ""
    precision: str = ""
    mode: str = ""
    metric: str = ""
    direction: str = ""
    rel_change: float = 0.0
    state: str = "confirmed"


Check = Callable[[Finding], bool]


@lru_cache(maxsize=4096)
def _globs(patterns: tuple[str, ...]) -> Callable[[str], re.Match[str] | None]:
    """One compiled expression for any of ``patterns`` (shared by the rules that name them)."""
    return re.compile("|".join(translate(p) for p in patterns)).match


def _text_check(field: str, values: Iterable[str]) -> Check:
    exact = frozenset(v for v in values if GLOB_CHARACTERS.isdisjoint(v))
    globs = tuple(v for v in values if not GLOB_CHARACTERS.isdisjoint(v))
    if not globs:
        return lambda finding: getattr(finding, field) in exact
    pattern = _globs(globs)
    return lambda finding: (
        getattr(finding, field) in exact or pattern(getattr(finding, field)) is not None
    )


def _as_list(value: str | Sequence[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def compile_rules(rules: Mapping[str, Any]) -> tuple[Check, ...]:
    """The checks a rule set makes, each one field's; a finding passes when all hold.

    Args:
        rules: field name to accepted value(s), as ``schemas.Rules`` stores them; fields that
            are absent or None accept anything.

    Returns:
        One check per field the rules name (none for the empty rule set).
    """
    checks: list[Check] = []
    for field in (*TEXT_FIELDS, *CHOICE_FIELDS):
        value = rules.get(field)
        if value is not None:
            checks.append(_text_check(field, _as_list(value)))
    least = rules.get("min_rel_change")
    if least is not None:
        bound = float(least)
        checks.append(lambda finding: abs(finding.rel_change) >= bound)
    return tuple(checks)


@dataclass(frozen=True, slots=True)
class Matcher:
    """A subscription's rules, compiled: ``matches(finding)`` says whether it selects it."""

    match: tuple[Check, ...]
    exclude: tuple[tuple[Check, ...], ...]

    def matches(self, finding: Finding) -> bool:
        """Whether every match check holds and no exclude rule set holds in full."""
        for check in self.match:
            if not check(finding):
                return False
        for vetoes in self.exclude:
            for check in vetoes:
                if not check(finding):
                    break
            else:
                return False
        return True


def compile_subscription(
    match: Mapping[str, Any], exclude: Sequence[Mapping[str, Any]] = ()
) -> Matcher:
    """A subscription's ``match`` and ``exclude`` rule sets compiled into one ``Matcher``."""
    if match.get("state") is None:
        match = {**match, "state": list(DEFAULT_STATES)}
    return Matcher(compile_rules(match), tuple(compile_rules(rules) for rules in exclude))


def compile_silence(matchers: Mapping[str, Any]) -> Matcher:
    """A silence's matchers as a ``Matcher``: every state unless the silence names some.

    Not ``compile_subscription``: its "confirmed only" default let a silence hold back the
    confirmed step but send the suspected one it meant to quiet as well.
    """
    return Matcher(compile_rules(matchers), ())


def matches(
    match: Mapping[str, Any], exclude: Sequence[Mapping[str, Any]], finding: Finding
) -> bool:
    """Whether a subscription with these rules selects ``finding`` (compiles each call)."""
    return compile_subscription(match, exclude).matches(finding)
