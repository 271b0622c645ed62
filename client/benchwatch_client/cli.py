"""``benchwatch-upload``: result files sent as one run, and the gate on its verdicts.

The light client's command, and the body of the service's ``benchwatch upload``: that one
adds the format list it knows and a dry run that parses the files locally. Exit codes CI can
act on: 0 stored, 1 rejected input, 2 server unreachable (or detection did not finish), 3
regressions found (with ``--fail-on-regression``).
"""

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx

from benchwatch_client import gate_report
from benchwatch_client import upload as client
from benchwatch_client.fields import METADATA, PROVENANCE
from benchwatch_client.outputs import Outputs
from benchwatch_client.text import markdown, markdown_link

# Fields taken from the CI's environment when no flag gives them (client.metadata).
CI_FIELDS = ("commit", "branch", "url", "trigger", "key")

UPLOAD_HELP = {
    "project": "the repository or team the run belongs to: its own histories, and what a "
    "token limited to a project may post (default: $BENCHWATCH_PROJECT, else default)",
    "shard": "this upload's part of a run whose jobs upload under one key (default: in CI, "
    "the job and the files' names, the key being the workflow's)",
    "shards": "how many shards make the run whole: it is detected once they are in "
    "(default: 1; a GitHub matrix: ${{ strategy.job-total }})",
    "default_branch": "the repository's default branch: a run of another branch is kept "
    "apart from the history (default: in CI, what GitHub's event or GitLab's "
    "CI_DEFAULT_BRANCH says; else the server's BENCHWATCH_DEFAULT_BRANCHES guesses)",
    "base_commit": "a branch's fork point from the default branch, whose run its verdicts "
    "compare with (default: git merge-base of a pull request's head and base, where the "
    "checkout can tell; else the newest default-branch run before it)",
}

# A progress report: bytes sent out of the total.
Progress = Callable[[int, int], None]
# A dry run: the files, the format and the fields; returns the exit status.
DryRun = Callable[[list[Path], str, dict[str, str]], int]


def add_upload_arguments(
    parser: argparse.ArgumentParser,
    formats: Sequence[str] = (),
    dry_run: str = "print the run's fields and where each came from",
) -> None:
    """Every flag of an upload: files, server, format, retries, gate, outputs and metadata.

    ``formats``: the names ``--format`` takes (none: any name, which the server checks);
    ``dry_run``: what ``--dry-run`` does before it sends nothing.
    """
    parser.add_argument("files", nargs="+", metavar="FILE", help="result files, one run")
    parser.add_argument(
        "--server",
        default=os.environ.get("BENCHWATCH_SERVER"),
        help="the server's URL (default: $BENCHWATCH_SERVER)",
    )
    parser.add_argument(
        "--token",
        default=os.environ.get("BENCHWATCH_TOKEN"),
        # the value is a secret: the help names the variable, never shows its value
        help="a token with scope ingest (default: $BENCHWATCH_TOKEN)",
    )
    parser.add_argument(
        "--format",
        default="auto",
        choices=list(formats) or None,
        help="format of the files (default: %(default)s, told by their content)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help=f"{dry_run}, send nothing (default: off)",
    )
    parser.add_argument(
        "--retries",
        type=int,
        default=5,
        help="retries on connection errors and 5xx (default: %(default)s)",
    )
    parser.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="exit 3 on a regression: a branch's (pull request's) verdicts against the "
        "default branch at once, the default branch's detection when it finishes (default: off)",
    )
    parser.add_argument(
        "--wait",
        type=float,
        default=600.0,
        help="seconds to wait for detection (default: %(default)s)",
    )
    parser.add_argument(
        "--outputs",
        default="",
        metavar="PATH",
        help="append name=value lines here: run_id, run_url and, for a branch, the verdict "
        "counts: GitHub's $GITHUB_OUTPUT, a GitLab dotenv report (default: none)",
    )
    gate_report.add_gate_arguments(parser)
    metadata = parser.add_argument_group("run metadata", "each sets a field of the run")
    for name in METADATA:
        source = "from the CI job, else from the files" if name in CI_FIELDS else "from the files"
        if name in UPLOAD_HELP:
            metadata.add_argument(f"--{name.replace('_', '-')}", dest=name, help=UPLOAD_HELP[name])
            continue
        if name == "machine":
            source = (
                "the host the files name, else the CI runner's name (RUNNER_NAME, "
                "CI_RUNNER_DESCRIPTION, BUILDKITE_AGENT_NAME, NODE_NAME), else this host's; "
                "with the device as a suffix"
            )
        metadata.add_argument(
            f"--{name.replace('_', '-')}",
            dest=name,
            help=f"the run's {name.replace('_', ' ')} (default: {source})",
        )


def upload(
    args: argparse.Namespace,
    progress: Progress | None = None,
    dry_run: DryRun | None = None,
    prog: str = "benchwatch-upload",
) -> int:
    """Upload result files as one run; exit 0 stored, 1 rejected, 2 unreachable, 3 regressed.

    ``dry_run``: what ``--dry-run`` does instead of sending (default: print the fields).
    """
    files = [Path(name) for name in args.files]
    if missing := [str(f) for f in files if not f.is_file()]:
        print(f"{prog}: no such file: {', '.join(missing)}", file=sys.stderr)
        return client.REJECTED
    flags = {name: getattr(args, name) for name in METADATA}
    fields = client.metadata(flags, files, client.environment())
    if args.dry_run:
        return (dry_run or _print_fields)(files, args.format, fields)
    if not args.server or not args.token:
        print(
            f"{prog}: give --server and --token (or BENCHWATCH_SERVER, BENCHWATCH_TOKEN)",
            file=sys.stderr,
        )
        return client.REJECTED
    uploader = client.Uploader(args.server, args.token, retries=args.retries)
    try:
        response = uploader.send(files, fields, args.format, progress)
    except httpx.TransportError as error:
        print(f"{prog}: {args.server} is unreachable: {error}", file=sys.stderr)
        return client.UNREACHABLE
    if response.status_code >= 500:
        print(f"{prog}: the server failed ({response.status_code})", file=sys.stderr)
        return client.UNREACHABLE
    if response.status_code >= 400:
        client.print_errors(response.json())
        return client.REJECTED
    run = response.json()
    url, cases = uploader.run_url(run["id"]), run["coverage"]["attempted"]
    outputs = Outputs(args.outputs)
    outputs.set(run_id=run["id"], run_url=url)
    state = "stored" if response.status_code == 201 else "already stored (a retry)"
    # A run is known by its project and key together (docs/formats.md).
    where = f"key {run['key']} of project {run.get('project', 'default')}"
    print(f"run {run['id']} {state}: {where}, {cases} cases")
    for line in client.describe_sources(run, only=("machine.name",)):
        print(line)
    link = markdown_link(url, f"run {run['id']}")
    summary = f"benchwatch: {link} {state}: {markdown(where)}, {cases} cases\n"
    for note in gate_report.write_step_summary(summary, os.environ, args.summary_file):
        print(f"{prog}: {note}", file=sys.stderr)
    if run.get("status") == "partial":
        expected = run.get("expected_shards") or "?"
        print(f"run {run['id']} waits for its other shards ({expected} expected)")
    if not (args.fail_on_regression or args.report_only):
        return client.OK
    return _gate(args, uploader, run, outputs, prog)


def _gate(
    args: argparse.Namespace,
    uploader: client.Uploader,
    run: dict[str, Any],
    outputs: Outputs,
    prog: str,
) -> int:
    """A branch's verdicts at once; else, failing on regression, the detection's findings."""
    if "@" in run["channel"]:  # a branch's run, kept apart from the default branch
        verdicts = uploader.verdicts_of(run["id"])
        if verdicts is None:
            print(f"{prog}: the server gave no verdicts", file=sys.stderr)
            return client.UNREACHABLE
        options = gate_report.gate_options(args)
        return gate_report.run_gate(verdicts, options, os.environ, outputs=outputs)
    if args.report_only:
        print("a default-branch run: its findings come from the server's detection")
        return client.OK
    if run.get("status") == "partial":
        print("the default branch's detection runs once every shard is in: nothing to gate yet")
        return client.OK
    found = uploader.regressions_of(run["id"], args.wait)
    if found is None:
        print(f"{prog}: detection did not finish within {args.wait:.0f} s", file=sys.stderr)
        return client.UNREACHABLE
    outputs.set(regressions=len(found))
    if not found:
        print("no regressions")
        return client.OK
    print(f"{len(found)} regression(s) first seen in run {run['id']}:")
    for regression in found:
        print(client.describe_regression(regression))
    return client.REGRESSED


def _print_fields(files: list[Path], fmt: str, fields: dict[str, str]) -> int:
    """The light client's dry run: each field it would send and where it came from."""
    said = json.loads(fields.get(PROVENANCE, "{}"))
    print(f"{len(files)} file(s), format {fmt}")
    for name, value in fields.items():
        if name != PROVENANCE:
            print(f"{name} = {value}  (from {said.get(name, 'a flag')})")
    return client.OK


def _progress_line(done: int, total: int) -> None:
    """A percentage on stderr when it is a terminal (a CI log gets no carriage returns)."""
    if sys.stderr.isatty():
        end = "\n" if done >= total else ""
        print(f"\rsent {done * 100 // max(total, 1)}% of {total} bytes", end=end, file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``benchwatch-upload`` console script."""
    parser = argparse.ArgumentParser(
        prog="benchwatch-upload",
        description="Upload benchmark result files to a benchwatch server as one run, and "
        "gate a pull request on its verdicts. Exit 0 stored, 1 rejected, 2 unreachable, "
        "3 regressed.",
    )
    add_upload_arguments(parser)
    return upload(parser.parse_args(argv), progress=_progress_line)
