"""A localization's probe of a built-in case: one case of a tier, measured in a probe environment.

A localization of a finding on a built-in case (a worker's run in one of its tiers) measures
that case again in each environment its search prepares. Those environments run a command, so
the built-in case gets one (``probe_suite``, which ``workers.repro.suite_of`` returns for a
built-in tier): ``python -m workers.case_probe [--repeats N] CASE``, run by the probe
environment's ``python`` (first on ``PATH``, ``workers.providers.probe_environment``). The pip
provider's environments see the worker's own packages after their own, so this module, the
harness and torch are importable there, and a component the spec swaps shadows the worker's.

CASE is a JSON object: the case's tier and its result identity (``CASE_IDENTITY``: suite,
model, category, mode, precision, config, batch_size), as the localization stores it
(``app.localization.service``, the benchmark's identity). The module checks it before it
imports torch, finds the one measurement of the tier with that identity (its compile config
and precision the recorded ones), pins itself as a shard's child does, measures it with the
worker's harness (``workers.measurements``) under the tier's plan, and writes the rows as a
native run (``POST /runs``'s body) into ``$BENCHWATCH_OUTPUT_DIR/case.json`` (to stdout where
that is not set), which the command suite reads back as a native upload. ``--repeats``: at
least that many timed calls (the tier's own where it makes more), so that one process gives a
probe's first round of samples: each process imports torch, which is seconds. A case that
fails or is skipped is rows saying so, exit 0; a CASE that names no case of the tier, or an
interpreter that is not the probe environment's, is one line on stderr, exit 2.

``--options-from-settings`` (a configs localization's probe, ``workers.config_bisect``): the
case is compiled as config ``default`` compiles it, torch.compile's plain call with no mode
and no options, and its rows keep the case's own config. Its config's own Inductor options
and mode are then among the probe's compiler settings, set globally by the settings hook,
which options given to torch.compile would override: so a probe of the slow config's case
under a mix of the two configs' settings compiles under that mix alone, the slow config's
own options replaced by it.
"""

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.benchmarks import vocabulary as vocab
from app.benchmarks.models import CASE_IDENTITY
from app.core.command_suites import CommandSuite

if TYPE_CHECKING:
    from workers.tiers import Measurement, Tier

MODULE = "workers.case_probe"
OUTPUT = "case.json"  # the file it writes in $BENCHWATCH_OUTPUT_DIR
FIELDS = ("tier", *CASE_IDENTITY)
MAX_CASE = 4096  # characters of CASE
MAX_FIELD = 256  # characters of one of its strings (a model's name, the longest, is 256)
CHANNEL = "probe"  # the channel of the native run it writes (read for its rows only)
PLAIN = "default"  # the config compiled as with --options-from-settings: no mode, no options
OPTIONS_FROM_SETTINGS = "--options-from-settings"


class BadCase(ValueError):
    """CASE names no built-in case: what is wrong with it, in one line."""


def case_argument(case: Mapping[str, Any]) -> str:
    """CASE for a localization's case: its tier and identity, as compact JSON."""
    return json.dumps(
        {name: case[name] for name in FIELDS if name in case}, sort_keys=True, separators=(",", ":")
    )


def probe_suite(case: Mapping[str, Any], pin_cores: str, repeats: int) -> CommandSuite | str:
    """The command suite that measures a localization's built-in case, or why there is none.

    ``pin_cores``: the worker's ``BENCHWATCH_PIN_CORES``, which the probe pins itself by as a
    shard's child does (the command's environment has none of the worker's settings). A
    configs localization's case is compiled ``--options-from-settings``.
    """
    from app.localization.configs import is_configs_case  # the worker's, not the probe's

    argument = case_argument(case)
    try:
        parse_case(argument)
    except BadCase as error:
        return f"the localization's case is not a built-in case: {error}"
    plain = [OPTIONS_FROM_SETTINGS] if is_configs_case(case) else []
    return CommandSuite(
        command=["python", "-m", MODULE, "--repeats", str(repeats), *plain, argument],
        env={"BENCHWATCH_PIN_CORES": pin_cores},
        outputs=[OUTPUT],
        format="native",
    )


def parse_case(text: str) -> dict[str, Any]:
    """CASE, checked for its shape and its tier (no torch needed).

    Raises:
        BadCase: not a JSON object of the tier and the identity fields, or a tier that is not
            a built-in one.
    """
    if len(text) > MAX_CASE:
        raise BadCase(f"CASE is {len(text)} characters long; at most {MAX_CASE}")
    try:
        case = json.loads(text)
    except ValueError as error:
        raise BadCase(f"CASE is not JSON: {error}") from None
    if not isinstance(case, dict):
        raise BadCase(f"CASE is a JSON {type(case).__name__}, not an object of {', '.join(FIELDS)}")
    missing = [name for name in FIELDS if name not in case]
    unknown = sorted(set(case) - set(FIELDS))
    if missing or unknown:
        raise BadCase(
            f"CASE has the fields {', '.join(FIELDS)}"
            + (f"; missing {', '.join(missing)}" if missing else "")
            + (f"; unknown {_shown(', '.join(unknown))}" if unknown else "")
        )
    for name in FIELDS:
        value = case[name]
        if name == "batch_size":
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                raise BadCase(f"CASE batch_size {_shown(value)}: an integer or null")
        elif not isinstance(value, str):
            raise BadCase(f"CASE {name} {_shown(value)}: a string")
        elif len(value) > MAX_FIELD:
            raise BadCase(f"CASE {name} is {len(value)} characters long; at most {MAX_FIELD}")
    if case["tier"] not in vocab.SUITE_TIERS:
        raise BadCase(
            f"tier {_shown(case['tier'])} is not a built-in tier ({', '.join(vocab.SUITE_TIERS)})"
        )
    return case


def find_measurement(tier: "Tier", case: Mapping[str, Any]) -> "Measurement":
    """The tier's one measurement whose result identity is the case's.

    Raises:
        BadCase: the tier measures no such case.
    """
    from workers.harness import identity
    from workers.tiers import tier_measurements

    wanted = {name: case[name] for name in CASE_IDENTITY}
    for measurement in tier_measurements(tier):
        if identity(*measurement) == wanted:
            return measurement
    what = "/".join(str(case[name]) for name in ("suite", "model"))
    how = ", ".join(
        f"{name} {case[name]}" for name in ("mode", "precision", "config", "batch_size")
    )
    raise BadCase(f"tier {case['tier']} measures no {_shown(what)} ({_shown(how)})")


def _shown(value: Any, limit: int = 80) -> str:
    """A value as an error line shows it: its repr, one line, cut."""
    text = repr(value) if not isinstance(value, str) else value
    text = " ".join(text.split())
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def _interpreter() -> None:
    """That this is the probe environment's interpreter, where the environment names one.

    Raises:
        BadCase: it is another (``python`` on PATH was not the probe's), or the provider
            prepared an image, which a built-in case cannot run in.
    """
    python = os.environ.get("BENCHWATCH_PYTHON")
    if python is None and os.environ.get("BENCHWATCH_IMAGE"):
        raise BadCase(
            "the provider prepared an image: a built-in case runs in a Python environment "
            "(a provider that answers a python)"
        )
    # Not resolved: a virtual environment's python links to the interpreter it was made from.
    if python is not None and os.path.abspath(python) != os.path.abspath(sys.executable):
        raise BadCase(
            f"this is {_shown(sys.executable, 200)}, not the probe environment's python "
            f"{_shown(python, 200)}"
        )


def measure(case: Mapping[str, Any], repeats: int, options_from_settings: bool = False) -> str:
    """The native run of the case's measurement, as JSON.

    ``options_from_settings``: compiled as config ``PLAIN`` is, its rows the case's config's.
    """
    from app.core.config import settings
    from workers.pinning import apply_pinning, plan_pinning

    # Before torch, as a shard's child: torch's threads start from here and inherit it.
    pinning = apply_pinning(plan_pinning(settings.PIN_CORES))
    import torch

    from app.runs.schemas import RunIn
    from app.suite_runs.rows import payload_rows
    from workers.environment import describe_environment, describe_machine
    from workers.measurements import run_measurements
    from workers.tiers import TIERS

    tier = TIERS[case["tier"]]
    measurement = find_measurement(tier, case)
    if options_from_settings:
        measurement = measurement._replace(config=PLAIN)
    plan = replace(tier.plan, repeats=max(tier.plan.repeats, repeats))
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    rows = run_measurements([measurement], device, plan, pinning)
    if options_from_settings:
        rows = [{**row, "config": case["config"]} for row in rows]
    run = RunIn.model_validate(
        {
            "key": "case-probe",
            "machine": describe_machine().model_dump(),
            "environment": describe_environment(CHANNEL).model_dump(),
            "tier": case["tier"],
            **payload_rows(rows),
        }
    )
    return run.model_dump_json(exclude_none=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Measure CASE and write its run; 2 with one line on stderr when CASE is not a case."""
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__)
    parser.add_argument("--repeats", type=int, default=1, help="at least this many timed calls")
    parser.add_argument(
        OPTIONS_FROM_SETTINGS,
        action="store_true",
        help="compile with no mode and no options of the config's own: the compiler settings "
        "the probe runs under stand for them",
    )
    parser.add_argument("case", metavar="CASE", help="the tier and the case's identity, JSON")
    args = parser.parse_args(argv)
    try:
        case = parse_case(args.case)
        _interpreter()
        written = measure(case, max(args.repeats, 1), args.options_from_settings)
    except BadCase as error:
        sys.stderr.write(f"benchwatch case probe: {error}\n")
        return 2
    except Exception as error:  # one line for the probe's reason, not a traceback's tail
        sys.stderr.write(
            f"benchwatch case probe: {type(error).__name__}: {_shown(str(error), 300)}\n"
        )
        return 1
    folder = os.environ.get("BENCHWATCH_OUTPUT_DIR")
    if folder:
        (Path(folder) / OUTPUT).write_text(written)
    else:
        sys.stdout.write(f"{written}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
