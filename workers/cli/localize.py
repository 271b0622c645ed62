"""The localization's commands: localize (start one), repro (its measurement by hand), prepare.

``localize`` asks for a finding's localization as ``POST /api/v1/localizations`` does (the same
service call, ``started_by`` ``cli:<user>``), in the configured database, and sends it to the
machine's worker through the broker. ``repro`` prints what a worker measures for a finding:
the last good and the first bad environments as specs, the command that prepares each and the
command suite that measures the case in it; with ``--run`` it runs them here, with this
process's settings standing for the worker's (run it on the machine, with its worker's
``BENCHWATCH_*``). ``prepare`` prepares one spec as the worker does, through its provider
and cache (``workers.repro`` says what is shared with the worker).
"""

import argparse
import json
import os
import shlex
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workers.cli.common import Command, has_broker, open_database

if TYPE_CHECKING:
    from app.core.command_suites import CommandSuite
    from workers.compiler_settings import Configured
    from workers.localize import Measuring, Oracle
    from workers.repro import ProbeCommand

FINDINGS = ("regression", "failure", "aggregate")
# configs:RUN:SLOW:FAST: a case slower under one config (benchmark SLOW) than under another
# (benchmark FAST) on run RUN (app.localization.configs).
CONFIGS = "configs"
OUTPUT_PLACEHOLDER = "<an empty directory>"
RECORDED = {"good": "last good", "bad": "first bad"}
Finding = tuple[str, int] | tuple[str, int, int, int]


def finding(text: str) -> Finding:
    """``KIND:ID`` or ``configs:RUN:SLOW:FAST`` as a tuple of its parts; else a usage error.

    KIND a finding's kind, or localization; a configs pair names its run and two benchmarks.
    """
    kind, *numbers = text.split(":")
    wanted = 3 if kind == CONFIGS else 1
    known = kind in (*FINDINGS, "localization", CONFIGS)
    # Row ids (app.core.bounds.RowId): ASCII digits, 1 to 2**31 - 1.
    ids = [int(n) for n in numbers if n.isascii() and n.isdigit() and 1 <= int(n) < 2**31]
    if known and len(numbers) == len(ids) == wanted:
        return (kind, ids[0]) if wanted == 1 else (kind, ids[0], ids[1], ids[2])
    raise argparse.ArgumentTypeError(
        f"{text!r} names no finding: give KIND:ID, KIND one of {', '.join(FINDINGS)} or "
        "localization (an existing one's case and environments), ID a positive integer, "
        "e.g. regression:12; or configs:RUN:SLOW:FAST, a case's benchmark SLOW slower than "
        "its benchmark FAST under another config on run RUN, e.g. configs:41:7:8"
    )


def _named(parts: Sequence[object]) -> str:
    """A finding as it was given: ``regression:12``, ``configs:41:7:8``."""
    return ":".join(str(part) for part in parts)


def _user() -> str:
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container's)
        return str(os.getuid())


def cmd_localize(args: argparse.Namespace) -> int:
    """Ask for a finding's localization, as the API does; print its id and state."""
    kind, *numbers = args.finding
    if kind == "localization":
        print(
            "benchwatch localize: give the finding (regression:ID, failure:ID, aggregate:ID or "
            "configs:RUN:SLOW:FAST), not a localization",
            file=sys.stderr,
        )
        return 2
    if not has_broker("localize"):  # bench.localize runs on a machine's Celery worker only
        return 2
    from app.core.config import settings
    from app.core.queue import CeleryPublisher
    from app.jobs import LOCALIZE, TASKS
    from app.localization import configs, service

    database = open_database()
    publisher = CeleryPublisher(settings.BROKER_URL or "", TASKS.queue_for)
    database.set_publisher(publisher)
    started_by = f"cli:{_user()}"[:200]
    try:
        with database.session_scope() as session:
            if kind == CONFIGS:
                run_id, slow_id, fast_id = numbers
                found, new = configs.request_configs_localization(
                    session,
                    run_id,
                    slow_id,
                    fast_id,
                    started_by=started_by,
                    budget=settings.LOCALIZE_BUDGET,
                )
            else:
                found, new = service.request_localization(
                    session,
                    kind,
                    numbers[0],
                    started_by=started_by,
                    budget=settings.LOCALIZE_BUDGET,
                    command_suites=settings.LOCALIZE_SUITES,
                )
            shown = (found.id, found.state, found.machine, dict(found.case))
    finally:
        publisher.client.close()
        database.dispose()
    localization_id, state, machine, case = shown
    print(f"localization {localization_id} {state}")
    what = f"{case.get('suite')}/{case.get('model')} {case.get('metric') or ''}".strip()
    named = _named(args.finding)
    if new:
        queue = TASKS.queue_for(LOCALIZE, machine=machine)
        print(f"{named}: {what} on {machine}, sent to the queue {queue}", file=sys.stderr)
    else:
        print(f"{named} has this one {state} already: not a new one", file=sys.stderr)
    return 0


def _asked(kind: str, number: int, *more: int) -> dict[str, Any]:
    """What a worker would measure for the finding: machine, case, environments, and whence.

    A localization's own (what its worker got); a finding's as a new localization would
    have them (``service.measured_case``: refused, 2, when no worker measures it); two
    configs' (``configs_target``) as a new configs localization would.
    """
    from app.core.config import settings
    from app.localization import configs, service

    database = open_database()
    try:
        with database.session_scope() as session:
            if kind == CONFIGS:
                slow_id, fast_id = more
                pair = configs.configs_target(session, number, slow_id, fast_id)
                good, bad = pair.environments()
                return {
                    "about": _named((kind, number, *more)),
                    "machine": pair.machine,
                    "case": pair.case(),
                    "good": good,
                    "bad": bad,
                    "runs": {"good": number, "bad": number},
                }
            if kind == "localization":
                row = service.get_localization(session, number)
                return {
                    "about": f"localization {row.id} of {row.finding_kind} {row.finding_id}",
                    "machine": row.machine,
                    "case": dict(row.case),
                    "good": dict(row.good_environment),
                    "bad": dict(row.bad_environment),
                    "runs": {"good": row.good_run_id, "bad": row.bad_run_id},
                }
            target = service.target_of(session, kind, number)  # type: ignore[arg-type]
            return {
                "about": f"{kind} {number}",
                "machine": target.machine,
                "case": service.measured_case(target, settings.LOCALIZE_SUITES),
                "good": service.components(target.good_run.environment),
                "bad": service.components(target.bad_run.environment),
                "runs": {"good": target.good_run.id, "bad": target.bad_run.id},
            }
    finally:
        database.dispose()


def cmd_repro(args: argparse.Namespace) -> int:
    """Print (and with --run, run) the measurement of a finding's case in both environments."""
    from app.core.config import settings
    from workers import repro
    from workers.github_commits import GitHubError
    from workers.localize import Oracle

    asked = _asked(*args.finding)
    case = asked["case"]
    suite = repro.suite_of(case, settings)
    if isinstance(suite, str):
        print(f"benchwatch repro: {asked['about']}: {suite}", file=sys.stderr)
        return 2
    measuring = repro.measuring(suite, asked["machine"], settings)
    oracle = Oracle(measuring, case)
    try:
        specs = repro.references(oracle, asked["good"], asked["bad"], settings.LOCALIZE_SOURCES)
    except GitHubError as error:  # a commit source on GitHub refused or could not be read
        print(f"benchwatch repro: {asked['about']}: {error}", file=sys.stderr)
        return 2
    print(f"{asked['about']} on {asked['machine']}: {_what(case)}")
    print(f"case: {json.dumps(case, sort_keys=True)}")
    print(f"provider: {measuring.provider}; environments cached in {measuring.environments.root}")
    if isinstance(specs, str):
        print(f"benchwatch repro: {specs}", file=sys.stderr)
        return 1
    unmade = False
    for side in repro.SIDES:
        spec = specs[side]
        print(f"\n{side} (the {RECORDED[side]} run {asked['runs'][side]}'s environment):")
        if isinstance(spec, str):
            print(f"  cannot be prepared: {spec}")
            unmade = True
            continue
        print(f"  spec:    {spec.spec.canonical()}")
        if spec.settings:
            print(f"  under:   {json.dumps(dict(spec.settings), sort_keys=True)}")
        print(f"  prepare: {shlex.join(repro.prepare_argv(measuring.provider, spec.spec))}")
        if (defined := settings.PROVIDERS.get(measuring.provider)) is not None:
            print(
                f"           (runs {shlex.join(defined.command)}, the spec on its stdin, "
                "BENCHWATCH_ENV_DIR and BENCHWATCH_ENV_KEY set)"
            )
        placeholder = Path(OUTPUT_PLACEHOLDER)
        _print_measure(suite, repro.probe_command(suite, None, placeholder, spec.settings))
        print(
            "           in the prepared environment: its python's directory first on PATH, "
            "BENCHWATCH_PYTHON (and VIRTUAL_ENV) naming it, or BENCHWATCH_IMAGE its image"
        )
    if unmade:
        return 1
    if not args.run:
        return 0
    made = {side: spec for side, spec in specs.items() if not isinstance(spec, str)}
    return _run(args.samples, measuring, oracle, made, suite)


def _what(case: dict[str, Any]) -> str:
    metric = f" {case['metric']}" if case.get("metric") else ""
    unit = f" ({case['unit']})" if case.get("unit") else ""
    return f"{case.get('suite')}/{case.get('model')}{metric}{unit}, tier {case.get('tier')}"


def _print_measure(suite: "CommandSuite", command: "ProbeCommand") -> None:
    """The command suite's line: ``env`` (a program, no shell) with what it adds and drops."""
    base_path = os.environ.get("PATH", "")
    words = ["env"]
    for name in command.removed:
        words += ["-u", name]
    for name, value in sorted(command.added.items()):
        if name == "PATH" and base_path and value.endswith(os.pathsep + base_path):
            value = value.removesuffix(os.pathsep + base_path) + os.pathsep + "$PATH"
        words.append(f"{name}={value}")
    print(f"  measure: {shlex.join([*words, *command.argv])}")
    print(f"    in:    {command.cwd or 'the current directory'}; the environment the worker's,")
    print("           less its BENCHWATCH_* settings, with the variables shown")
    print(
        f"    reads: the files matching {suite.outputs} in $BENCHWATCH_OUTPUT_DIR, as "
        f"{suite.format}: the case's samples"
    )


def _run(
    samples: int,
    measuring: "Measuring",
    oracle: "Oracle",
    specs: "dict[str, Configured]",
    suite: "CommandSuite",
) -> int:
    """Prepare and measure good, then bad; each side's samples, the medians and the change."""
    from app.localization.judge import reproduces
    from app.localization.probing import BuildFailed
    from workers import repro
    from workers.providers import Prepared, UnknownProvider

    def same(spec: "Configured") -> "Configured":
        return spec

    measure = oracle.strategy(same)
    measured: dict[str, list[float]] = {}
    for side in repro.SIDES:
        print(f"\n{side}: preparing", flush=True)
        try:
            made = measuring.environments.prepare(measuring.provider, specs[side].spec)
        except UnknownProvider as error:
            print(f"benchwatch repro: {error}", file=sys.stderr)
            return 2
        if not isinstance(made, Prepared):
            print(f"{side}: does not build: {made.reason}")
            return 1
        how = "built" if made.built else "from the cache"
        print(f"{side}: prepared ({how}) in {made.directory}: {made.python or made.image}")
        placeholder = Path(OUTPUT_PLACEHOLDER)
        _print_measure(suite, repro.probe_command(suite, made, placeholder, specs[side].settings))
        got = measure(specs[side], samples)
        if isinstance(got, BuildFailed):
            print(f"{side}: {got.reason}")
            return 1
        measured[side] = list(got)
        print(f"{side}: samples {[round(x, 6) for x in got]}")
    good, bad = (statistics.median(measured[side]) for side in repro.SIDES)
    change = (bad - good) / good if good else float("nan")
    print(f"\nmedian good {good:.6g}, bad {bad:.6g}: {change:+.1%}")
    found = reproduces(measured["good"], measured["bad"], oracle.case.get("higher_is_better"))
    print(f"pre-flight: {found.reason}")
    return 0


def cmd_prepare(args: argparse.Namespace) -> int:
    """Prepare one spec's environment as the worker does; print the provider's answer."""
    from pydantic import ValidationError

    from app.core.config import settings
    from app.core.providers import EnvSpec
    from workers.providers import Prepared, UnknownProvider, environments

    try:
        spec = EnvSpec.model_validate_json(args.spec)
    except ValidationError as error:
        problem = error.errors()[0]
        where = ".".join(str(part) for part in problem["loc"]) or "the spec"
        print(f"benchwatch prepare: SPEC {where}: {problem['msg']}", file=sys.stderr)
        return 2
    provider = args.provider or settings.LOCALIZE_PROVIDER
    try:
        made = environments(settings).prepare(provider, spec)
    except UnknownProvider as error:
        print(f"benchwatch prepare: {error}", file=sys.stderr)
        return 2
    if isinstance(made, Prepared):
        how = "built" if made.built else "from the cache"
        print(f"{how}: {made.directory}", file=sys.stderr)
        answer = {"python": made.python} if made.python else {"image": made.image}
        print(json.dumps(answer))
        return 0
    print(json.dumps({"unbuildable": made.reason}))
    return 1


def _localize_options(localize: argparse.ArgumentParser) -> None:
    localize.add_argument(
        "finding",
        type=finding,
        metavar="FINDING",
        help="the finding: regression:ID, failure:ID, aggregate:ID, or configs:RUN:SLOW:FAST "
        "(on run RUN, benchmark SLOW slower than the same case's FAST under another config)",
    )


def _repro_options(repro: argparse.ArgumentParser) -> None:
    repro.add_argument(
        "finding",
        type=finding,
        metavar="FINDING",
        help="regression:ID, failure:ID, aggregate:ID, configs:RUN:SLOW:FAST, or "
        "localization:ID (that one's case and environments)",
    )
    repro.add_argument(
        "--run",
        action="store_true",
        help="prepare and measure good, then bad, here, and print the samples, medians and "
        "change (default: off, print the commands)",
    )
    repro.add_argument(
        "--samples",
        type=_positive,
        default=10,
        help="with --run: samples of each side, the command run again until it has them "
        "(default: %(default)s, the pre-flight's first round)",
    )


def _positive(text: str) -> int:
    number = int(text)
    if number < 1:
        raise argparse.ArgumentTypeError("at least 1")
    return number


def _prepare_options(prepare: argparse.ArgumentParser) -> None:
    prepare.add_argument(
        "spec",
        metavar="SPEC",
        help='the spec, one JSON object: {"components": {"torch": {"version": "2.6.0"}}}',
    )
    prepare.add_argument(
        "--provider",
        help="pip or one of BENCHWATCH_PROVIDERS (default: $BENCHWATCH_LOCALIZE_PROVIDER, "
        "else pip)",
    )


COMMANDS: dict[str, Command] = {
    "localize": (
        "start a localization of a finding on its machine, as the API does",
        cmd_localize,
        _localize_options,
    ),
    "repro": (
        "print (--run: run) the commands that measure a finding's case in its good and bad "
        "environments, as the worker does",
        cmd_repro,
        _repro_options,
    ),
    "prepare": (
        "prepare a localization probe's environment from its spec, as the worker does",
        cmd_prepare,
        _prepare_options,
    ),
}
