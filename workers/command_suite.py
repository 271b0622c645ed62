"""A command suite's shard: run the operator's command, read the files it wrote as an upload.

The command (``BENCHWATCH_COMMAND_SUITES``, ``app.core.command_suites``) runs in a process
group of its own with ``$BENCHWATCH_OUTPUT_DIR`` (a fresh, empty directory),
``$BENCHWATCH_SHARD_INDEX`` and ``$BENCHWATCH_SHARD_COUNT`` added to the worker's environment,
less the worker's own ``BENCHWATCH_*`` settings (its database URL, its pepper). The files it
leaves there that match the suite's ``outputs`` are parsed by the upload parsers
(``app.uploads.service.build_run``) under the uploads' caps, and their result rows become the
shard's rows. Why a shard has none: the command exited non-zero, was killed at its timeout,
wrote no matching file, or a file did not parse (where).
"""

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.core.command_suites import CommandSuite
from app.suite_runs.service import ShardPlan
from app.uploads.base import UploadFile
from app.uploads.service import BadUpload, build_run
from workers.shard_runner import ShardOutcome, run_command_process, worker_environment

MAX_OUTPUT_FILES = 1000  # files read back from one shard


def plan_command_shards(name: str, suite: CommandSuite) -> list[ShardPlan]:
    """The suite's shards: the command once per shard; the cases are known once it has run."""
    if suite.shards == 1:
        return [ShardPlan(name, [])]
    return [ShardPlan(f"{name} {i + 1}/{suite.shards}", []) for i in range(suite.shards)]


def command_environment(
    suite: CommandSuite, output: Path, index: int, count: int
) -> dict[str, str]:
    """The command's environment: the worker's, less its settings, plus the suite's and ours."""
    return (
        worker_environment()
        | suite.env
        | {
            "BENCHWATCH_OUTPUT_DIR": str(output),
            "BENCHWATCH_SHARD_INDEX": str(index),
            "BENCHWATCH_SHARD_COUNT": str(count),
        }
    )


def run_command_shard(
    suite: CommandSuite,
    *,
    index: int,
    machine: str,
    device: str,
    timeout_s: float,
    heartbeat: Callable[[], bool],
    every_s: float,
    max_bytes: int,
    parse_timeout_s: float | None,
) -> ShardOutcome:
    """Run shard ``index`` of the suite and read back what it wrote."""
    with tempfile.TemporaryDirectory(prefix="benchwatch-command-") as folder:
        output = Path(folder) / "output"
        output.mkdir()
        reason = run_command_process(
            suite.command,
            cwd=suite.cwd,
            env=command_environment(suite, output, index, suite.shards),
            logs=Path(folder),
            timeout_s=suite.timeout_s or timeout_s,
            heartbeat=heartbeat,
            every_s=every_s,
        )
        if reason is not None:
            return ShardOutcome(None, reason)
        return read_outputs(
            suite,
            output,
            machine=machine,
            device=device,
            max_bytes=max_bytes,
            parse_timeout_s=parse_timeout_s,
        )


def read_outputs(
    suite: CommandSuite,
    output: Path,
    *,
    machine: str,
    device: str,
    max_bytes: int,
    parse_timeout_s: float | None,
) -> ShardOutcome:
    """The result rows of the files in ``output`` that match the suite's globs."""
    try:
        files = _collect(suite.outputs, output, max_bytes)
    except ValueError as error:
        return ShardOutcome(None, str(error), retry=False)
    if not files:
        written = sorted(str(p.relative_to(output)) for p in output.rglob("*") if p.is_file())
        return ShardOutcome(
            None,
            f"the command wrote no file matching {suite.outputs} in $BENCHWATCH_OUTPUT_DIR "
            f"(it wrote {written[:10] or 'nothing'})",
            retry=False,
        )
    hints = suite.hints.model_dump(exclude_none=True)
    fields = {"machine": machine, "device": device, "key": "command"} | hints
    try:
        run = build_run(files, suite.format, fields, timeout_s=parse_timeout_s)
    except BadUpload as error:
        problems = "; ".join(_where(problem) for problem in error.errors[:5])
        return ShardOutcome(
            None, f"the command's output could not be read: {problems}", retry=False
        )
    rows = [result.model_dump(mode="json", exclude_unset=True) for result in run.results]
    profiles = [p.model_dump(mode="json", exclude={"code"}) for p in run.kernel_profiles]
    return ShardOutcome(rows, profiles=profiles)


def _where(problem: dict[str, Any]) -> str:
    """One problem of a file: ``out.csv line 2 field speedup: message``."""
    place = " ".join(
        f"{name} {problem[key]}" if name else str(problem[key])
        for key, name in (("file", ""), ("line", "line"), ("record", "record"), ("loc", ""))
        if problem.get(key) is not None
    )
    field = f" field {problem['field']}" if problem.get("field") else ""
    return f"{place or 'output'}{field}: {problem.get('message', problem)}"


def _collect(globs: list[str], output: Path, max_bytes: int) -> list[UploadFile]:
    """The regular files the globs match, each once, inside ``output``, within the caps."""
    root = output.resolve()
    paths: dict[Path, None] = {}
    for glob in globs:
        for path in sorted(output.glob(glob)):
            if path.is_file() and not path.is_symlink() and path.resolve().is_relative_to(root):
                paths[path] = None
    if len(paths) > MAX_OUTPUT_FILES:
        raise ValueError(f"the command wrote {len(paths)} files; at most {MAX_OUTPUT_FILES}")
    total = sum(path.stat().st_size for path in paths)
    if total > max_bytes:
        raise ValueError(
            f"the command's files hold {total} bytes; at most {max_bytes} "
            "(BENCHWATCH_MAX_BODY_BYTES, as an upload)"
        )
    return [UploadFile(str(path.relative_to(output)), path.read_bytes()) for path in paths]
