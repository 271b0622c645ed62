"""``benchwatch upload``: the light client's upload, with the service's formats and dry run.

The upload, its metadata from CI and the gate are ``benchwatch_client``'s (the command
``benchwatch-upload`` of the light client); here the format list is checked before sending,
``--dry-run`` parses and validates the files locally, and progress is drawn by tqdm.
"""

import argparse
import json
from pathlib import Path

from workers.cli.common import Command


def cmd_upload(args: argparse.Namespace) -> int:
    """Upload result files as one run; exit 0 stored, 1 rejected, 2 unreachable, 3 regressed."""
    from benchwatch_client.cli import upload

    from workers.progress import progress_bar

    with progress_bar("B", in_bytes=True) as progress:
        return upload(args, progress=progress, dry_run=_dry_run, prog="benchwatch upload")


def _dry_run(files: list[Path], fmt: str, fields: dict[str, str]) -> int:
    """Parse and validate here, print where each field comes from and the run, send nothing."""
    from benchwatch_client.upload import OK, REJECTED, describe_sources, print_errors

    from app.uploads.base import UploadFile
    from app.uploads.service import BadUpload, build_run

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
    from benchwatch_client.cli import add_upload_arguments

    from app.uploads.service import FORMATS

    add_upload_arguments(upload, FORMATS, dry_run="parse and validate the files here")


COMMANDS: dict[str, Command] = {
    "upload": ("upload result files to a server as one run", cmd_upload, _upload_options),
}
