"""The pull-request gate's reports: the terminal's table and the Markdown summary.

Verdicts are hostile input: the terminal gets printable text only (no ANSI escapes or bidi
overrides), and Markdown gets :func:`escape_markdown`'s escaping and http(s)-only links, as
GitHub issues do. Markdown is cut at a line to fit a byte limit (:func:`cap_markdown`).
"""

from collections.abc import Callable

from benchwatch_client.gate_github import plain
from benchwatch_client.gate_judge import GateOptions, Outcome
from benchwatch_client.gate_verdicts import ORDER, Report, ReportedVerdict
from benchwatch_client.text import markdown as escape_markdown
from benchwatch_client.text import markdown_link

LABELS = {"no_baseline": "no baseline"}
PLURALS = {"regression": "regressions", "improvement": "improvements", "error": "errors"}


def _ordered(outcome: Outcome) -> list[ReportedVerdict]:
    """Regressions (gating first), improvements, errors; the largest change first in each."""

    def rank(item: ReportedVerdict) -> tuple[int, bool, float]:
        size = abs(item.rel_change) if item.rel_change is not None else 0.0
        gating = item.verdict == "regression" and outcome.gates(item)
        return ORDER.index(item.verdict), not gating, -size

    listed = ("regression", "improvement", "error")
    return sorted((i for i in outcome.report.items if i.verdict in listed), key=rank)


def _value(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _change(value: float | None) -> str:
    return "" if value is None else f"{value:+.1%}"


def _p(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value:.1e}" if value < 0.001 else f"{value:.3f}"


def _many(count: int, verdict: str) -> str:
    """``3 regressions``, ``1 error``, ``2 no baseline``."""
    word = LABELS.get(verdict, verdict)
    return f"{count} {PLURALS.get(verdict, word) if count != 1 else word}"


def _count_line(outcome: Outcome) -> str:
    parts = [_many(outcome.counts[v], v) for v in ORDER if outcome.counts[v]]
    return " · ".join(parts) or "no benchmarks to judge"


def _never_line(outcome: Outcome) -> str:
    """Why the errors and missing baselines listed did not fail the gate."""
    if outcome.counts["error"]:
        return "errors and missing baselines never fail the gate"
    return "a missing baseline never fails the gate" if outcome.counts["no_baseline"] else ""


def headline(outcome: Outcome) -> str:
    """One line: what the gate decided, and why."""
    regressions = outcome.counts["regression"]
    gating = _many(len(outcome.gating), "regression")
    if outcome.gating and outcome.options.report_only:
        return f"report only: would have failed on {gating}"
    if outcome.gating:
        return f"failed: {gating}"
    if regressions:
        return f"passed: {_many(regressions, 'regression')}, none gating"
    return "passed: no regression"


def _baseline_line(report: Report, escape: Callable[[str], str] = str) -> str:
    """What the verdicts compared with; ``escape`` applies to the server's words only."""
    branch = escape(report.default_branch or "the default branch")
    if report.baseline_how == "none" or not report.baseline_commit:
        return f"no baseline on {branch} to compare with"
    how = {"merge-base": "the merge base", "nearest-earlier": "the nearest earlier commit"}
    runs = ", ".join(str(r) for r in report.baseline_runs)
    return (
        f"compared with {branch} at {escape(report.baseline_commit[:12])} "
        f"({escape(how.get(report.baseline_how, report.baseline_how))}"
        + (f"; runs {runs})" if runs else ")")
    )


def _gating_line(options: GateOptions, escape: Callable[[str], str] = str) -> str:
    chosen = [f"suites {escape(', '.join(options.suites))}"] if options.suites else []
    chosen += [f"metrics {escape(', '.join(options.metrics))}"] if options.metrics else []
    return "gating " + " and ".join(chosen) if chosen else ""


def render_table(outcome: Outcome, max_rows: int = 20) -> str:
    """The terminal's report: a headline, listed verdicts in aligned columns, then counts."""
    report = outcome.report
    lines = [
        f"benchwatch gate, run {report.run_id or '?'} ({report.branch} {report.commit[:12]}): "
        + headline(outcome),
        _baseline_line(report),
    ]
    lines += [g for g in (_gating_line(outcome.options),) if g]
    lines += [f"warning: {glob} matches no benchmark" for glob in outcome.unmatched]
    listed = _ordered(outcome)
    rows = [("verdict", "benchmark", "metric", "base", "new", "change", "p", "note")]
    for item in listed[: max(max_rows, 0)]:
        note = item.reason if item.verdict == "error" else ""
        if item.verdict == "regression" and not outcome.gates(item):
            note = "not gating"
        rows.append(
            (
                LABELS.get(item.verdict, item.verdict),
                plain(item.benchmark, 70),
                plain(item.measure, 30),
                _value(item.base),
                _value(item.new),
                _change(item.rel_change),
                _p(item.p_value),
                plain(note, 80),
            )
        )
    if len(rows) > 1:
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        right = {3, 4, 5}  # numbers line up on the right
        for row in rows:
            cells = [
                c.rjust(w) if i in right else c.ljust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            ]
            lines.append("  " + "  ".join(cells).rstrip())
    if len(listed) > max(max_rows, 0):
        lines.append(f"  and {len(listed) - max(max_rows, 0)} more")
    lines += [line for line in (_count_line(outcome), _never_line(outcome)) if line]
    if report.server_total > len(report.items):
        lines.append(f"the server listed {len(report.items)} of {report.server_total} verdicts")
    if report.url:
        lines.append(f"all verdicts: {report.url}")
    return "\n".join(lines) + "\n"


def _md_row(item: ReportedVerdict, first: str, last: str) -> str:
    cells = [
        first,
        markdown_link(item.series_url, item.benchmark),
        escape_markdown(item.measure),
        f"{_value(item.base)} → {_value(item.new)}",
        _change(item.rel_change),
        last,
    ]
    return "| " + " | ".join(cells) + " |"


def markdown_parts(outcome: Outcome) -> tuple[str, str]:
    """The Markdown report in two parts: the head (headline, counts, baseline) and the tables."""
    report = outcome.report
    mark = "❌" if outcome.exit_status else ("⚠️" if outcome.gating else "✅")
    on = f" on {escape_markdown(report.branch)}" if report.branch else ""
    # The headline, counts and gating words are benchwatch's own; only names are escaped.
    head = [f"### {mark} benchwatch: {headline(outcome)}{on}", ""]
    head += [f"{_count_line(outcome)}  ", _baseline_line(report, escape_markdown)]
    if never := _never_line(outcome):
        head[-1] += "  "
        head.append(never)
    if gating := _gating_line(outcome.options, escape_markdown):
        head[-1] += "  "
        head.append(gating)
    head += [f"\n**Warning:** {escape_markdown(g)} matches no benchmark" for g in outcome.unmatched]
    if report.url:
        head += ["", markdown_link(report.url, f"All verdicts for run {report.run_id or ''}")]
    listed = [i for i in _ordered(outcome) if i.verdict != "error"]
    body = []
    if listed:
        body += ["| | Benchmark | Metric | Base → New | Change | p |", "| --- " * 6 + "|"]
        for item in listed:
            first = "🟢 improvement"
            if item.verdict == "regression":
                first = "🔴 regression" if outcome.gates(item) else "🟡 regression, not gating"
            body.append(_md_row(item, first, _p(item.p_value)))
    rest = [i for v in ("error", "no_baseline", "pass") for i in report.items if i.verdict == v]
    if rest:
        counted = ", ".join(_many(outcome.counts[v], v) for v in ORDER[2:] if outcome.counts[v])
        body += ["", f"<details><summary>{len(rest)} more ({counted})</summary>", ""]
        body += ["| Verdict | Benchmark | Metric | Base → New | Change | Reason |"]
        body += ["| --- " * 6 + "|"]
        for item in rest:
            label = LABELS.get(item.verdict, item.verdict)
            body.append(_md_row(item, label, escape_markdown(item.reason)))
        body += ["", "</details>"]
    return "\n".join(head) + "\n", "\n".join(body) + "\n" if body else ""


def render_markdown(outcome: Outcome, limit: int | None = None, marker: str = "") -> str:
    """The whole Markdown report, cut to ``limit`` UTF-8 bytes when given."""
    head, body = markdown_parts(outcome)
    text = (marker + "\n" if marker else "") + head + ("\n" + body if body else "")
    return cap_markdown(text, limit, outcome.report.url) if limit is not None else text


def cap_markdown(text: str, limit: int, more_url: str = "") -> str:
    """``text`` cut at a line to fit ``limit`` UTF-8 bytes, with a note saying so.

    Bytes, not characters: at least as strict as GitHub's character limits, and the step
    summary's limit is in bytes. An open ``<details>`` is closed, so the rest still renders.
    """
    if len(text.encode()) <= limit:
        return text
    where = f" {markdown_link(more_url, 'All verdicts')}." if more_url else ""
    note = (
        f"\n\n_Cut to fit GitHub's limit of {limit} bytes: some benchmarks are not shown._{where}\n"
    )
    closing = "\n\n</details>"
    budget = limit - len(note.encode()) - len(closing.encode())
    kept, used = [], 0
    for line in text.split("\n"):
        size = len(line.encode()) + 1
        if used + size > budget:
            break
        kept.append(line)
        used += size
    cut = "\n".join(kept)
    if cut.count("<details>") > cut.count("</details>"):
        cut += closing
    return cut + note
