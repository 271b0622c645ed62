"""``benchwatch upload``: result files from CI sent as one run, and the gate on its verdicts."""

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workers.cli.common import Command

if TYPE_CHECKING:
    from workers.upload_client import Uploader


# Fields `benchwatch upload` takes from the CI's environment when no flag gives them
# (workers.upload_client.metadata).
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


def cmd_upload(args: argparse.Namespace) -> int:
    """Upload result files as one run; exit 0 stored, 1 rejected, 2 unreachable, 3 regressed."""
    import httpx

    from app.uploads.service import METADATA
    from workers import upload_client as client
    from workers.progress import progress_bar

    files = [Path(name) for name in args.files]
    if missing := [str(f) for f in files if not f.is_file()]:
        print(f"benchwatch upload: no such file: {', '.join(missing)}", file=sys.stderr)
        return client.REJECTED
    flags = {name: getattr(args, name) for name in METADATA}
    fields = client.metadata(flags, files, client.environment())
    if args.dry_run:
        return _dry_run(files, args.format, fields)
    if not args.server or not args.token:
        print(
            "benchwatch upload: give --server and --token (or BENCHWATCH_SERVER, BENCHWATCH_TOKEN)",
            file=sys.stderr,
        )
        return client.REJECTED
    uploader = client.Uploader(args.server, args.token, retries=args.retries)
    try:
        with progress_bar("B", in_bytes=True) as progress:
            response = uploader.send(files, fields, args.format, progress)
    except httpx.TransportError as error:
        print(f"benchwatch upload: {args.server} is unreachable: {error}", file=sys.stderr)
        return client.UNREACHABLE
    if response.status_code >= 500:
        print(f"benchwatch upload: the server failed ({response.status_code})", file=sys.stderr)
        return client.UNREACHABLE
    if response.status_code >= 400:
        client.print_errors(response.json())
        return client.REJECTED
    run = response.json()
    state = "stored" if response.status_code == 201 else "already stored (a retry)"
    # A run is known by its project and key together (docs/formats.md).
    where = f"key {run['key']} of project {run.get('project', 'default')}"
    print(f"run {run['id']} {state}: {where}, {run['coverage']['attempted']} cases")
    for line in client.describe_sources(run, only=("machine.name",)):
        print(line)
    if run.get("status") == "partial":
        expected = run.get("expected_shards") or "?"
        print(f"run {run['id']} waits for its other shards ({expected} expected)")
    if not args.fail_on_regression:
        return client.OK
    return _gate(args, uploader, run)


def _gate(args: argparse.Namespace, uploader: "Uploader", run: dict[str, Any]) -> int:
    """--fail-on-regression: a branch's verdicts at once, else the detection's regressions."""
    from workers import upload_client as client

    if "@" in run["channel"]:  # a branch's run, kept apart from the default branch
        from workers import gate_report

        verdicts = uploader.verdicts_of(run["id"])
        if verdicts is None:
            print("benchwatch upload: the server gave no verdicts", file=sys.stderr)
            return client.UNREACHABLE
        return gate_report.run_gate(verdicts, gate_report.gate_options(args), os.environ)
    if run.get("status") == "partial":
        print("the default branch's detection runs once every shard is in: nothing to gate yet")
        return client.OK
    found = uploader.regressions_of(run["id"], args.wait)
    if found is None:
        print(
            f"benchwatch upload: detection did not finish within {args.wait:.0f} s", file=sys.stderr
        )
        return client.UNREACHABLE
    if not found:
        print("no regressions")
        return client.OK
    print(f"{len(found)} regression(s) first seen in run {run['id']}:")
    for regression in found:
        print(client.describe_regression(regression))
    return client.REGRESSED


def _dry_run(files: list[Path], fmt: str, fields: dict[str, str]) -> int:
    """Parse and validate here, print where each field comes from and the run, send nothing."""
    from app.uploads.base import UploadFile
    from app.uploads.service import BadUpload, build_run
    from workers.upload_client import OK, REJECTED, describe_sources, print_errors

    try:
        run_in = build_run([UploadFile(f.name, f.read_bytes()) for f in files], fmt, fields)
    except BadUpload as error:
        print_errors({"detail": error.detail, "errors": error.errors})
        return REJECTED
    summary = run_in.model_dump(mode="json", exclude={"results"}, exclude_none=True)
    summary["results"] = len(run_in.results)
    summary["first_results"] = [
        r.model_dump(mode="json", exclude_none=True) for r in run_in.results[:3]
    ]
    for line in describe_sources(summary):
        print(line)
    print(json.dumps(summary, indent=2))
    return OK


def _upload_options(upload: argparse.ArgumentParser) -> None:
    from app.uploads.service import FORMATS, METADATA

    upload.add_argument("files", nargs="+", metavar="FILE", help="result files, one run")
    upload.add_argument(
        "--server",
        default=os.environ.get("BENCHWATCH_SERVER"),
        help="the server's URL (default: $BENCHWATCH_SERVER)",
    )
    upload.add_argument(
        "--token",
        default=os.environ.get("BENCHWATCH_TOKEN"),
        # the value is a secret: the help names the variable, never shows its value
        help="a token with scope ingest (default: $BENCHWATCH_TOKEN)",
    )
    upload.add_argument(
        "--format",
        default="auto",
        choices=FORMATS,
        help="format of the files (default: %(default)s, told by their content)",
    )
    upload.add_argument(
        "--dry-run", action="store_true", help="parse and validate, send nothing (default: off)"
    )
    upload.add_argument(
        "--retries",
        type=int,
        default=5,
        help="retries on connection errors and 5xx (default: %(default)s)",
    )
    upload.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="exit 3 on a regression: a branch's (pull request's) verdicts against the "
        "default branch at once, the default branch's detection when it finishes (default: off)",
    )
    upload.add_argument(
        "--wait",
        type=float,
        default=600.0,
        help="seconds to wait for detection (default: %(default)s)",
    )
    from workers.gate_report import add_gate_arguments  # here: it imports httpx

    add_gate_arguments(upload)
    metadata = upload.add_argument_group("run metadata", "each sets a field of the run")
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


COMMANDS: dict[str, Command] = {
    "upload": ("upload result files to a server as one run", cmd_upload, _upload_options),
}
