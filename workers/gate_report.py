"""The pull-request gate, client side: the server's verdicts as an exit status and reports.

``benchwatch upload --fail-on-regression`` fetches ``GET /api/v1/runs/{run_id}/verdicts`` (one
verdict per benchmark: pass, regression, improvement, no_baseline, error) and hands the JSON to
:func:`run_gate`, which prints a table, writes a Markdown summary where the CI shows one
(``$GITHUB_STEP_SUMMARY``; a file GitLab keeps as an artifact), optionally posts a GitHub check
run and one sticky pull-request comment, and returns the exit status: 3 when a gating
regression exists (never in report-only mode), else 0. ``no_baseline`` never fails, and
neither does ``error`` (a benchmark the server could not judge is listed, not held against the
pull request). Posting is best effort: no GitHub answer changes the exit status. This module
judges and renders; :mod:`workers.gate_github` finds where to post and sends what it is given.

Everything in the verdicts (model names, reasons, branch names) comes from uploaded files, so it
is hostile input: the terminal gets printable text only (no ANSI escapes or bidi overrides), and
Markdown gets :func:`escape_markdown`'s escaping and http(s)-only links, as GitHub issues do.
"""

import argparse
import fnmatch
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from app.core.urls import is_http_url
from app.notifications.receivers.github_issue import escape_markdown, markdown_link
from workers.gate_github import CheckRun, Posting, plain, post_to_github

PASSED, NO_VERDICT, GATE_FAILED = 0, 2, 3  # upload_client's OK, UNREACHABLE, REGRESSED
ORDER = ("regression", "improvement", "error", "no_baseline", "pass")  # how reports list them
LABELS = {"no_baseline": "no baseline"}
PLURALS = {"regression": "regressions", "improvement": "improvements", "error": "errors"}
STEP_SUMMARY_BYTES = 1024 * 1024  # GitHub drops a step's whole summary above 1 MiB
CHECK_OUTPUT_CHARS = 65_535  # a check run's output.summary and output.text, each
COMMENT_CHARS = 65_536  # an issue comment's body
GITLAB_SUMMARY_FILE = "benchwatch-summary.md"


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


@dataclass(frozen=True)
class Verdict:
    """One benchmark's verdict, as the server judged it (fields cleaned, never trusted)."""

    verdict: str = "error"
    suite: str = ""
    model: str = ""
    config: str = ""
    precision: str = ""
    mode: str = ""
    batch_size: int | None = None
    metric: str = ""
    unit: str = ""
    new: float | None = None
    base: float | None = None
    rel_change: float | None = None
    p_value: float | None = None
    reason: str = ""
    series_url: str = ""

    @property
    def benchmark(self) -> str:
        """``suite/model/config/precision/mode``, and the batch size when there is one."""
        name = "/".join(p for p in (self.suite, self.model, self.config, self.precision, self.mode))
        return f"{name} bs{self.batch_size}" if self.batch_size is not None else name

    @property
    def measure(self) -> str:
        """The metric, with its unit."""
        return f"{self.metric} ({self.unit})" if self.unit else self.metric


def _verdict(raw: object) -> Verdict:
    """An item of the server's list; one it cannot read becomes an ``error`` saying so."""
    if not isinstance(raw, Mapping):
        return Verdict(reason="the server sent a verdict that is not an object")
    verdict, reason = raw.get("verdict"), plain(raw.get("reason"), 300)
    if verdict not in ORDER:
        reason = f"unknown verdict {plain(verdict, 40)!r} from the server. {reason}".strip()
        verdict = "error"
    batch = raw.get("batch_size")
    url = raw.get("series_url")
    return Verdict(
        verdict=str(verdict),
        suite=plain(raw.get("suite")),
        model=plain(raw.get("model")),
        config=plain(raw.get("config")),
        precision=plain(raw.get("precision")),
        mode=plain(raw.get("mode")),
        batch_size=batch if isinstance(batch, int) and not isinstance(batch, bool) else None,
        metric=plain(raw.get("metric")),
        unit=plain(raw.get("unit"), 20),
        new=_number(raw.get("new")),
        base=_number(raw.get("base")),
        rel_change=_number(raw.get("rel_change")),
        p_value=_number(raw.get("p_value")),
        reason=reason,
        series_url=url if isinstance(url, str) and is_http_url(url) else "",
    )


class BadVerdicts(ValueError):
    """The server's answer is not a verdicts document: there is no verdict to gate on."""


@dataclass(frozen=True)
class Report:
    """The server's verdicts for one upload, and what they were compared with."""

    run_id: object
    branch: str
    commit: str
    default_branch: str
    baseline_how: str
    baseline_commit: str
    baseline_runs: tuple[int, ...]
    items: tuple[Verdict, ...]
    url: str
    server_total: int  # the server's counts, summed: above len(items) when it listed only some


def parse_verdicts(document: object) -> Report:
    """Read ``GET /api/v1/runs/{run_id}/verdicts``; raise :class:`BadVerdicts` if it is not one."""
    if not isinstance(document, Mapping) or not isinstance(document.get("items"), list):
        raise BadVerdicts("the server's answer holds no list of verdicts")
    baseline = document.get("baseline")
    baseline = baseline if isinstance(baseline, Mapping) else {}
    counts = document.get("counts")
    counts = counts if isinstance(counts, Mapping) else {}
    runs = baseline.get("run_ids")
    url = document.get("url")
    return Report(
        run_id=document.get("run_id") if isinstance(document.get("run_id"), int) else None,
        branch=plain(document.get("branch"), 100),
        commit=plain(document.get("commit"), 64),
        default_branch=plain(document.get("default_branch"), 100),
        baseline_how=plain(baseline.get("how"), 40) or "none",
        baseline_commit=plain(baseline.get("commit"), 64),
        baseline_runs=tuple(r for r in runs if isinstance(r, int))[:20]
        if isinstance(runs, list)
        else (),
        items=tuple(_verdict(item) for item in document["items"]),
        url=url if isinstance(url, str) and is_http_url(url) else "",
        server_total=sum(
            n for n in counts.values() if isinstance(n, int) and not isinstance(n, bool) and n > 0
        ),
    )


@dataclass(frozen=True)
class GateOptions:
    """What gates and where the verdicts go; the CLI's flags, one field each."""

    suites: tuple[str, ...] = ()  # --gate-suite globs; none: every suite gates
    metrics: tuple[str, ...] = ()  # --gate-metric globs; none: every metric gates
    report_only: bool = False  # say what would have failed; never fail
    max_rows: int = 20  # of the terminal table
    summary_file: str = ""  # Markdown written here too (GitLab's artifact)
    post_check: bool = False
    post_comment: bool = False
    channel: str = ""  # the upload's channel: part of the comment's key
    key: str = ""  # the comment's key; default: $GITHUB_WORKFLOW and the channel
    timeout_s: float = 10.0  # per GitHub request


def add_gate_arguments(parser: argparse.ArgumentParser) -> None:
    """The gate's flags, for ``benchwatch upload``; :func:`gate_options` reads them back."""
    gate = parser.add_argument_group(
        "pull request gate", "with --fail-on-regression: the verdicts of a pull request upload"
    )
    gate.add_argument(
        "--gate-suite",
        action="append",
        metavar="GLOB",
        help="only regressions in suites matching GLOB fail; repeatable (default: every suite)",
    )
    gate.add_argument(
        "--gate-metric",
        action="append",
        metavar="GLOB",
        help="only regressions of metrics matching GLOB fail; repeatable (default: every metric)",
    )
    gate.add_argument(
        "--report-only",
        action="store_true",
        help="report what would have failed, and exit 0 (default: off)",
    )
    gate.add_argument(
        "--summary-file",
        default="",
        metavar="PATH",
        help="write the Markdown summary here (default: $BENCHWATCH_SUMMARY_FILE, or "
        f"{GITLAB_SUMMARY_FILE} in GitLab CI)",
    )
    gate.add_argument(
        "--post-check",
        action="store_true",
        help="post a GitHub check run on the pull request's head, with $GITHUB_TOKEN "
        "(default: off)",
    )
    gate.add_argument(
        "--post-comment",
        action="store_true",
        help="keep one comment on the pull request up to date, with $GITHUB_TOKEN (default: off)",
    )
    gate.add_argument(
        "--gate-key",
        default="",
        help="names the check run and the comment apart from other gates' "
        "(default: $GITHUB_WORKFLOW/channel)",
    )


def gate_options(args: argparse.Namespace) -> GateOptions:
    """The options :func:`add_gate_arguments`' flags (and ``--channel``) were given."""
    return GateOptions(
        suites=tuple(args.gate_suite or ()),
        metrics=tuple(args.gate_metric or ()),
        report_only=args.report_only,
        summary_file=args.summary_file,
        post_check=args.post_check,
        post_comment=args.post_comment,
        channel=getattr(args, "channel", None) or "",
        key=args.gate_key,
    )


@dataclass(frozen=True)
class Outcome:
    """The gate's judgement of a report under some options."""

    report: Report
    options: GateOptions
    gating: tuple[Verdict, ...]  # regressions that fail the gate (or would, in report-only)
    counts: Mapping[str, int]
    unmatched: tuple[str, ...]  # globs that matched no benchmark: probably a typo

    def gates(self, item: Verdict) -> bool:
        """Whether ``item`` is chosen by the suite and metric globs (all are, when none given)."""
        return _chosen(item.suite, self.options.suites) and _chosen(
            item.metric, self.options.metrics
        )

    @property
    def exit_status(self) -> int:
        """3 when a gating regression exists, outside report-only mode; else 0."""
        return GATE_FAILED if self.gating and not self.options.report_only else PASSED

    @property
    def conclusion(self) -> str:
        """The check run's conclusion: failure, neutral (report-only would fail) or success."""
        if not self.gating:
            return "success"
        return "neutral" if self.options.report_only else "failure"


def _chosen(name: str, globs: Sequence[str]) -> bool:
    return not globs or any(fnmatch.fnmatchcase(name, glob) for glob in globs)


def judge(report: Report, options: GateOptions) -> Outcome:
    """Which regressions gate; case-sensitive globs, as suite and metric names are stored."""
    counts = dict.fromkeys(ORDER, 0)
    for item in report.items:
        counts[item.verdict] += 1
    unmatched = tuple(
        f"--gate-suite {glob}"
        for glob in options.suites
        if not any(fnmatch.fnmatchcase(i.suite, glob) for i in report.items)
    ) + tuple(
        f"--gate-metric {glob}"
        for glob in options.metrics
        if not any(fnmatch.fnmatchcase(i.metric, glob) for i in report.items)
    )
    outcome = Outcome(report, options, (), counts, unmatched)
    gating = tuple(i for i in report.items if i.verdict == "regression" and outcome.gates(i))
    return Outcome(report, options, gating, counts, unmatched)


def _ordered(outcome: Outcome) -> list[Verdict]:
    """Regressions (gating first), improvements, errors; the largest change first in each."""

    def rank(item: Verdict) -> tuple[int, bool, float]:
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


def _md_row(item: Verdict, first: str, last: str) -> str:
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


def write_step_summary(
    markdown: str, env: Mapping[str, str], summary_file: str = "", more_url: str = ""
) -> list[str]:
    """Append to ``$GITHUB_STEP_SUMMARY``; write the summary file (GitLab: an artifact).

    The file is ``summary_file``, else ``$BENCHWATCH_SUMMARY_FILE``, else
    ``benchwatch-summary.md`` when ``GITLAB_CI=true``; it is overwritten, one report per job.
    Returns a line for each file (or failure to write one); a failure never fails the gate.
    """
    notes = []
    if step := env.get("GITHUB_STEP_SUMMARY", ""):
        path = Path(step)
        try:
            used = path.stat().st_size if path.exists() else 0
            room = STEP_SUMMARY_BYTES - used - 1
            if room < 1024:
                notes.append(f"step summary not written: {step} is already near GitHub's 1 MiB")
            else:
                with path.open("a", encoding="utf-8") as summary:
                    summary.write(("\n" if used else "") + cap_markdown(markdown, room, more_url))
                notes.append(f"summary appended to {step}")
        except OSError as exc:
            notes.append(f"step summary not written: {plain(exc)}")
    file = summary_file or env.get("BENCHWATCH_SUMMARY_FILE", "")
    if not file and env.get("GITLAB_CI") == "true":
        file = GITLAB_SUMMARY_FILE
    if file:
        try:
            Path(file).write_text(markdown, encoding="utf-8")
            notes.append(f"summary written to {file}")
        except OSError as exc:
            notes.append(f"summary file not written: {plain(exc)}")
    return notes


def _github_posting(outcome: Outcome) -> Posting:
    """What the options ask to post to GitHub, rendered for :func:`post_to_github`."""
    options, report = outcome.options, outcome.report
    check_run = None
    if options.post_check:
        head, body = markdown_parts(outcome)
        check_run = CheckRun(
            conclusion=outcome.conclusion,
            title=plain(headline(outcome), 200),
            summary=cap_markdown(head, CHECK_OUTPUT_CHARS, report.url),
            text=cap_markdown(body or "No benchmarks to list.", CHECK_OUTPUT_CHARS, report.url),
            details_url=report.url,
            external_id="" if report.run_id is None else str(report.run_id),
        )

    def comment(marker: str) -> str:
        return render_markdown(outcome, COMMENT_CHARS, marker)

    return Posting(
        check_run=check_run,
        comment=comment if options.post_comment else None,
        key=options.key,
        channel=options.channel,
        timeout_s=options.timeout_s,
    )


def run_gate(
    verdicts: object,
    options: GateOptions,
    env: Mapping[str, str],
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Report the verdicts everywhere asked, and return the exit status the CLI returns.

    3 on a gating regression (0 in report-only mode), else 0; 2 when ``verdicts`` is not a
    verdicts document (no verdict: neither a pass nor a failure can be claimed). Summaries and
    posts that fail are reported on ``err`` and leave the status as it is.
    """
    out, err = out or sys.stdout, err or sys.stderr
    try:
        report = parse_verdicts(verdicts)
    except BadVerdicts as exc:
        err.write(f"benchwatch gate: {exc}; no verdict\n")
        return NO_VERDICT
    outcome = judge(report, options)
    out.write(render_table(outcome, options.max_rows))
    markdown = render_markdown(outcome)
    for note in write_step_summary(markdown, env, options.summary_file, report.url):
        err.write(f"benchwatch gate: {note}\n")
    for posted in post_to_github(_github_posting(outcome), env):
        state = "posted" if posted.ok else "not posted (best effort: the gate's status stands)"
        err.write(f"benchwatch gate: {posted.what} {state}: {posted.message}\n")
    return outcome.exit_status
