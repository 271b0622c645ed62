"""The pull-request gate's judgement: which regressions gate, and the exit status.

Only regressions chosen by the suite and metric globs gate; ``no_baseline`` and ``error``
never fail (a benchmark the server could not judge is listed, not held against the pull
request), and report-only mode says what would have failed and exits 0.
"""

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from benchwatch_client.gate_verdicts import ORDER, Report, ReportedVerdict

PASSED, NO_VERDICT, GATE_FAILED = 0, 2, 3  # upload_client's OK, UNREACHABLE, REGRESSED


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


@dataclass(frozen=True)
class Outcome:
    """The gate's judgement of a report under some options."""

    report: Report
    options: GateOptions
    gating: tuple[ReportedVerdict, ...]  # regressions that fail the gate (or would, in report-only)
    counts: Mapping[str, int]
    unmatched: tuple[str, ...]  # globs that matched no benchmark: probably a typo

    def gates(self, item: ReportedVerdict) -> bool:
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
