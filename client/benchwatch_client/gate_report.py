"""The pull-request gate, client side: the server's verdicts as an exit status and reports.

``benchwatch-upload --fail-on-regression`` (and ``benchwatch upload``) fetches
``GET /api/v1/runs/{run_id}/verdicts`` (one verdict per benchmark: pass, regression,
improvement, no_baseline, error) and hands the JSON to :func:`run_gate`, which prints a table,
writes a Markdown summary where the CI shows one (``$GITHUB_STEP_SUMMARY``; a file GitLab keeps
as an artifact), optionally posts a GitHub check run and one sticky pull-request comment, sets
the step's outputs (the verdict counts), and returns the exit status: 3 when a gating
regression exists (never in report-only mode), else 0. ``no_baseline`` never fails, and
neither does ``error`` (a benchmark the server could not judge is listed, not held against the
pull request). Posting is best effort: no GitHub answer changes the exit status. This module
holds the flags and runs the gate: :mod:`.gate_verdicts` reads the verdicts, :mod:`.gate_judge`
judges them, :mod:`.gate_render` writes the reports, and :mod:`.gate_github` finds where to
post and sends what it is given.

Everything in the verdicts comes from uploaded files: each module reads it as hostile input.
"""

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from benchwatch_client.gate_github import CheckRun, Posting, plain, post_to_github
from benchwatch_client.gate_judge import NO_VERDICT, GateOptions, Outcome, judge
from benchwatch_client.gate_render import (
    cap_markdown,
    headline,
    markdown_parts,
    render_markdown,
    render_table,
)
from benchwatch_client.gate_verdicts import BadVerdicts, parse_verdicts
from benchwatch_client.outputs import Outputs

STEP_SUMMARY_BYTES = 1024 * 1024  # GitHub drops a step's whole summary above 1 MiB
CHECK_OUTPUT_CHARS = 65_535  # a check run's output.summary and output.text, each
COMMENT_CHARS = 65_536  # an issue comment's body
GITLAB_SUMMARY_FILE = "benchwatch-summary.md"


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
    outputs: Outputs | None = None,
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
    if outputs is not None:
        counts = outcome.counts
        outputs.set(
            verdicts=len(report.items),
            regressions=counts["regression"],
            improvements=counts["improvement"],
            passes=counts["pass"],
            no_baseline=counts["no_baseline"],
            errors=counts["error"],
            gating=len(outcome.gating),
        )
    out.write(render_table(outcome, options.max_rows))
    markdown = render_markdown(outcome)
    for note in write_step_summary(markdown, env, options.summary_file, report.url):
        err.write(f"benchwatch gate: {note}\n")
    for posted in post_to_github(_github_posting(outcome), env):
        state = "posted" if posted.ok else "not posted (best effort: the gate's status stands)"
        err.write(f"benchwatch gate: {posted.what} {state}: {posted.message}\n")
    return outcome.exit_status
