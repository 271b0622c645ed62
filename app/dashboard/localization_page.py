"""A localization's page, and what the alerts page shows of each finding's newest one.

A localization's answer is the worker's JSON (``docs/localize.md``): its culprit is shown by
kind (a component, a commit, a range of commits, a compiler setting) and any other kind as its
keys and values, so a kind the worker learns later is still shown, as text. Every string here
came from a run's environment, a clone's commit or a worker: the templates escape it, and a
commit's link is a link only when it is http(s) (``app.core.urls.is_http_url``).
"""

import json
from collections.abc import Iterable, Mapping, Sequence
from statistics import median
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session, load_only

from app.core.urls import is_http_url
from app.dashboard import format as fmt
from app.dashboard import page_figures
from app.localization.models import UNFINISHED, Localization, LocalizationProbe
from app.localization.service import CONFIGS, LocalizationNotFound

PROBES_SHOWN = 200  # a bisection of 512 commits has about 11; the rest are in the API
LISTED = 20  # commits of a range, or still suspected, named on the page
STATE_WORDS = {
    "queued": "queued",
    "running": "running",
    "culprit_found": "culprit found",
    "not_reproduced": "not reproduced",
    "inconclusive": "inconclusive",
    "failed": "failed",
}
# Where a finding is shown: its row on its alert group's page, by the row's id there.
ROW_ID = {"regression": "regression", "failure": "failure", "aggregate": "aggregate"}
API_PATH = {
    "regression": "/api/v1/regressions",
    "failure": "/api/v1/failures",
    "aggregate": "/api/v1/aggregate-findings",
}
SIDES = (("good", "last good"), ("bad", "first bad"))


def newest_of(
    session: Session, findings: Mapping[str, Iterable[int]]
) -> dict[tuple[str, int], Any]:
    """Each finding's newest localization, in brief, by (kind, id); one statement for all.

    ``findings``: the ids shown, by kind. A finding has one unfinished localization at a time,
    and none is asked while it has one, so the newest tells whether one is queued or running.
    """
    wanted = [
        (Localization.finding_kind == kind) & Localization.finding_id.in_(ids)
        for kind, ids in ((kind, sorted(set(ids))) for kind, ids in findings.items())
        if ids
    ]
    if not wanted:
        return {}
    newest = (
        select(func.max(Localization.id))
        .where(or_(*wanted))
        .group_by(Localization.finding_kind, Localization.finding_id)
    )
    columns = (Localization.finding_kind, Localization.finding_id, Localization.state)
    found = session.scalars(
        select(Localization)
        .where(Localization.id.in_(newest))
        .options(load_only(*columns, Localization.answer, Localization.reason))
    )
    return {(one.finding_kind, one.finding_id): brief(one) for one in found}


def brief(localization: Localization) -> dict[str, Any]:
    """A localization in a line: its state, culprit (or why there is none) and page."""
    answer = localization.answer or {}
    culprit = answer.get("culprit")
    return {
        "id": localization.id,
        "state": localization.state,
        "words": STATE_WORDS.get(localization.state, localization.state),
        "culprit": culprit_line(culprit) if isinstance(culprit, Mapping) else "",
        "reason": localization.reason,
        "unfinished": localization.state in UNFINISHED,
        "href": f"/localizations/{localization.id}",
    }


def culprit_line(culprit: Mapping[str, Any]) -> str:
    """A culprit in one line: the component's versions, the commit and its title, ..."""
    kind = culprit.get("kind")
    if kind == "commit":
        commit = _text(culprit.get("commit", ""))[:12]
        title = _text(culprit.get("title", ""))
        return f"{_text(culprit.get('component', ''))} commit {commit} {title}".strip()
    if kind == "commit_range":
        commits = len(culprit.get("commits") or [])
        return f"{_text(culprit.get('component', ''))}: one of {commits} commits that do not build"
    if kind in ("component", "setting"):
        pairs = culprit.get("versions" if kind == "component" else "values") or {}
        if isinstance(pairs, Mapping) and pairs:
            shown = "; ".join(f"{name} {_pair(pair)}" for name, pair in pairs.items())
            return f"setting {shown}" if kind == "setting" else shown
        return f"{kind} {_text(culprit.get('names', ''))}"
    return "; ".join(f"{key}: {_text(value)}" for key, value in culprit.items())


def culprit_view(culprit: Mapping[str, Any]) -> dict[str, Any]:
    """A culprit as the page's table: its kind, a row per field, and its link when http(s).

    A link that is not http(s) (``javascript:``) stays a row of text, never an ``href``.
    """
    link = culprit.get("link")
    safe = link if isinstance(link, str) and is_http_url(link) else None
    rows: list[tuple[str, str]] = []
    has_pairs = any(isinstance(culprit.get(key), Mapping) for key in ("versions", "values"))
    for key, value in culprit.items():
        if key == "kind" or (key == "link" and safe) or (key == "names" and has_pairs):
            continue
        if key in ("versions", "values") and isinstance(value, Mapping):
            rows += [(str(name), _pair(pair)) for name, pair in value.items()]
        elif key in ("commits", "remaining") and isinstance(value, list):
            more = f" and {len(value) - LISTED} more" if len(value) > LISTED else ""
            rows.append((key, ", ".join(_text(c)[:12] for c in value[:LISTED]) + more))
        else:
            rows.append((str(key), _text(value)))
    return {"kind": _text(culprit.get("kind", "")), "rows": rows, "link": safe}


def _pair(pair: Any) -> str:
    """A [good, bad] pair as "good → bad" (a missing side as an en dash)."""
    if isinstance(pair, list | tuple) and len(pair) == 2:
        good, bad = (fmt.MISSING if side is None else _text(side) for side in pair)
        return f"{good} → {bad}"
    return _text(pair)


def _text(value: Any) -> str:
    """A value of the worker's JSON as text: a string as it is, anything else as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
        return ", ".join(str(v) for v in value)
    return json.dumps(value, sort_keys=True, default=str)


def localization_page(session: Session, localization_id: int) -> dict[str, Any]:
    """One localization: where it stands, its culprit, costs, chart and probes (404: none).

    The probes read are at most ``PROBES_SHOWN``, in their order; the rest are counted.
    """
    found = session.get(Localization, localization_id)
    if found is None:
        raise LocalizationNotFound(localization_id)
    probes = list(
        session.scalars(
            select(LocalizationProbe)
            .where(LocalizationProbe.localization_id == found.id)
            .order_by(LocalizationProbe.position, LocalizationProbe.id)
            .limit(PROBES_SHOWN)
        )
    )
    total = len(probes)
    if total == PROBES_SHOWN:
        total = (
            session.scalar(
                select(func.count()).where(LocalizationProbe.localization_id == found.id)
            )
            or total
        )
    answer = found.answer or {}
    culprit = answer.get("culprit")
    case = found.case or {}
    levels = reference_levels(answer, probes)
    chart = page_figures.probe_chart(
        [(p.position, p.label, p.outcome, p.samples or []) for p in probes],
        levels,
        str(case.get("metric", "")),
        str(case.get("unit", "")),
    )
    return {
        "localization": found,
        "words": STATE_WORDS.get(found.state, found.state),
        "unfinished": found.state in UNFINISHED,
        "finding": finding_link(found),
        "compared": compared(found),
        "case": case,
        "case_line": " · ".join(
            _text(case[key])
            for key in ("model", "suite", "config", "precision", "mode")
            if case.get(key)
        ),
        "diff": [
            (name, _pair(pair)) for name, pair in (answer.get("environment_diff") or {}).items()
        ],
        "culprit": culprit_view(culprit) if isinstance(culprit, Mapping) else None,
        "culprit_line": culprit_line(culprit) if isinstance(culprit, Mapping) else "",
        "remaining": _listed(answer.get("remaining")),
        "strategies": [s for s in answer.get("strategies") or [] if isinstance(s, Mapping)],
        "notes": [_text(n) for n in answer.get("notes") or []],
        "preflight": answer.get("preflight")
        if isinstance(answer.get("preflight"), Mapping)
        else None,
        "levels": levels,
        "chart": chart if probes else None,
        "probes": [_probe(p, case) for p in probes],
        "more_probes": max(total - len(probes), 0),
    }


def _listed(commits: Any) -> dict[str, Any] | None:
    if not isinstance(commits, list) or not commits:
        return None
    return {"shown": [_text(c) for c in commits[:LISTED]], "more": max(len(commits) - LISTED, 0)}


def reference_levels(
    answer: Mapping[str, Any], probes: Sequence[LocalizationProbe]
) -> tuple[float | None, float | None]:
    """The good and bad levels: the pre-flight's reference medians.

    As the pre-flight stored them in the answer; else the medians of the pre-flight's
    reference probes (labelled "last good (reference)", "first bad (reference)").
    """
    preflight = answer.get("preflight")
    levels: list[float | None] = []
    for side, words in SIDES:
        summary = preflight.get(side) if isinstance(preflight, Mapping) else None
        level = summary.get("median") if isinstance(summary, Mapping) else None
        if not isinstance(level, int | float):
            samples = [
                value
                for p in probes
                if p.outcome == "reference" and p.strategy == "preflight" and words in p.label
                for value in p.samples or []
            ]
            level = median(samples) if samples else None
        levels.append(None if level is None else float(level))
    return levels[0], levels[1]


def _probe(probe: LocalizationProbe, case: Mapping[str, Any]) -> dict[str, Any]:
    samples = probe.samples or []
    unit = str(case.get("unit", ""))
    return {
        "position": probe.position,
        "label": probe.label,
        "strategy": probe.strategy,
        "outcome": probe.outcome,
        "samples": len(samples),
        "median": fmt.number(median(samples), unit) if samples else fmt.MISSING,
        "p_good": _p(probe.p_good),
        "p_bad": _p(probe.p_bad),
        "step_position": fmt.MISSING
        if probe.step_position is None
        else f"{probe.step_position:.2f}",
        "effect": fmt.percent(probe.effect),
        "rounds": probe.rounds,
        "reason": probe.reason,
    }


def _p(value: float | None) -> str:
    return fmt.MISSING if value is None else f"{value:.1e}"


def compared(localization: Localization) -> dict[str, Any] | None:
    """A configs localization's two configs and run (``app.localization.configs``); else None."""
    case = localization.case or {}
    against = case.get("against")
    if localization.finding_kind != CONFIGS or not isinstance(against, Mapping):
        return None
    return {
        "slow": _text(case.get("config", "")),
        "fast": _text(against.get("config", "")),
        "run": localization.bad_run_id,
    }


def finding_link(localization: Localization) -> dict[str, str]:
    """The finding's words and link: its row on its alert group's page, else the API's.

    A configs localization's is its two configs, linked to its run's page.
    """
    kind, finding_id = localization.finding_kind, localization.finding_id
    if (pair := compared(localization)) is not None:
        words = f"{pair['slow']} slower than {pair['fast']}"
        run = f"/runs/{pair['run']}" if pair["run"] else None
        return {"text": words, "href": run or f"/api/v1/localizations/{localization.id}"}
    words = f"{'aggregate finding' if kind == 'aggregate' else kind} {finding_id}"
    if localization.group_id is not None:
        anchor = f"{ROW_ID.get(kind, kind)}-{finding_id}"
        return {"text": words, "href": f"/alerts?group={localization.group_id}#{anchor}"}
    return {"text": words, "href": f"{API_PATH.get(kind, '/api/v1/localizations')}/{finding_id}"}
