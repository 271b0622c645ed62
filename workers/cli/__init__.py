"""The ``benchwatch`` command line: its parser and entry point.

The commands live with what they serve: ``service`` (serve, migrate, copy, retention, detect,
demo, token), ``benchmarks`` (run-suite, worker, beat, trigger), ``upload`` and ``localize``
(localize, repro, prepare). Each command imports what it needs inside its own function, and the
parser builds only the chosen command's options: the commands need very different stacks
(torch, SciPy, the web app, the database), and ``benchwatch --help`` or ``benchwatch
detect FILE`` should not wait for the ones they never use.
"""

import argparse
import sys
from collections.abc import Callable, Sequence

from workers.cli import benchmarks, localize, mcp, service, upload
from workers.cli.common import Command

DESCRIPTION = "benchwatch: a performance-regression dashboard for PyTorch stacks."
EPILOG = (
    "Settings come from BENCHWATCH_* environment variables or a .env file in the working "
    "directory (the README lists them), e.g. BENCHWATCH_DATABASE_URL (default: a SQLite file "
    "in the user data directory) and BENCHWATCH_BROKER_URL (default: unset, background work "
    "runs in the server). `benchwatch COMMAND --help` describes a command's options."
)
# Every command, the service's first: name -> (one-line help, what runs it, its options).
COMMANDS: dict[str, Command] = {
    **service.COMMANDS,
    **benchmarks.COMMANDS,
    **upload.COMMANDS,
    **localize.COMMANDS,
    **mcp.COMMANDS,
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser: every command, and the options of ``command`` (None: of all).

    A command's options are added only when it is the one asked for, because some need
    imports (numpy, the web app, the database models) that the others should not pay for.
    """
    parser = argparse.ArgumentParser(prog="benchwatch", description=DESCRIPTION, epilog=EPILOG)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (text, func, add_options) in COMMANDS.items():
        sub = commands.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".")
        if func is not None:
            sub.set_defaults(func=func)
        if command is None or command == name:
            add_options(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``benchwatch`` console script."""
    argv = sys.argv[1:] if argv is None else list(argv)
    command = next((arg for arg in argv if not arg.startswith("-")), "")
    args = build_parser(command).parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except Exception as exc:
        # Imported here, not on top: app.core.errors brings in FastAPI, which most commands
        # never use; one that can raise a DomainError has imported it already.
        from app.core.errors import DomainError

        if not isinstance(exc, DomainError):
            raise
        print(f"benchwatch: {exc.detail}", file=sys.stderr)
        return 2
