"""A localization's measurement as commands: how a worker measures the case, for a person too.

A machine's worker measures a localization's case with its provider
(``BENCHWATCH_LOCALIZE_PROVIDER``) and the command suite the case's tier names
(``BENCHWATCH_COMMAND_SUITES``), or for a built-in tier's case the one made for it
(``workers.case_probe``: the case measured by the worker's harness in the probe environment's
``python``), in environments its search makes specs of. ``benchwatch
repro`` shows, and runs, the search's pre-flight by hand: the last good and the first bad
environments prepared, and the command suite run in each. Both go through what is here, so
that what a person runs is what the worker ran:

- ``suite_of`` and ``measuring``: the command suite and the limits a worker measures with
  (``workers.tasks.localize`` builds its ``Measuring`` with them);
- ``references``: the pre-flight's two environments, by the search's own rule
  (``Search._spec``, ``Search._held``): the components that differ, each a version or, where
  its clone is in ``BENCHWATCH_LOCALIZE_SOURCES``, the commit its version names there, under
  the good run's compiler settings;
- ``prepare_argv``: the command that prepares a spec as the worker does (``benchwatch
  prepare``: the same provider and cache, ``Environments.prepare``);
- ``probe_command``: the command suite's argv, working directory and environment in a
  prepared environment under compiler settings, as ``Oracle`` runs it
  (``command_environment``, ``probe_environment``, ``settings_environment``).
  ``workers.localize.Oracle._run`` builds the same environment inline; it could take it
  from here.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.core.command_suites import CommandSuite, command_name
from app.core.config import Settings, settings
from app.core.providers import EnvSpec
from app.localization import isolate
from app.localization.judge import SCHEDULE
from workers import case_probe, settings_bisect
from workers.command_suite import command_environment
from workers.compiler_settings import Configured, applicable, settings_environment
from workers.localize import Measuring, Oracle, Search
from workers.providers import Prepared, environments, probe_environment
from workers.shard_runner import worker_environment

SIDES = ("good", "bad")


def suite_of(case: Mapping[str, Any], config: Settings = settings) -> CommandSuite | str:
    """The command suite that measures a localization's case here, or why there is none.

    A built-in tier's case: ``workers.case_probe``'s, pinned as this worker's shards are, each
    run making at least a probe's first round of samples (``SCHEDULE[0]``).
    """
    name = command_name(case.get("tier", ""))
    if name is None:
        return case_probe.probe_suite(case, config.PIN_CORES, repeats=SCHEDULE[0])
    if name not in config.COMMAND_SUITES:
        known = ", ".join(config.COMMAND_SUITES) or "none"
        return f"no command suite {name!r} in this worker's BENCHWATCH_COMMAND_SUITES ({known})"
    return config.COMMAND_SUITES[name]


def measuring(
    suite: CommandSuite,
    machine: str,
    config: Settings = settings,
    *,
    heartbeat: Callable[[], bool] = lambda: True,
    every_s: float = 20.0,
) -> Measuring:
    """How this worker measures with ``suite``: its provider, its cache, its limits."""
    return Measuring(
        environments=environments(config),
        provider=config.LOCALIZE_PROVIDER,
        suite=suite,
        machine=machine,
        device=suite.hints.device or "",
        timeout_s=config.SHARD_TIMEOUT_S,
        max_bytes=config.MAX_BODY_BYTES,
        parse_timeout_s=config.PARSE_TIMEOUT_S,
        heartbeat=heartbeat,
        every_s=every_s,
    )


def references(
    oracle: Oracle,
    good: Mapping[str, Any],
    bad: Mapping[str, Any],
    sources: Mapping[str, str],
) -> dict[str, Configured | str] | str:
    """The pre-flight's environments, side -> one (a str: why it cannot be); a str: none.

    As ``Search.run`` makes them: the recorded components folded (torch with its
    ``torch_git_sha``), those that differ at each side's values, under the good run's compiler
    settings (``Search._held``); where only compiler settings differ, the settings
    strategy's references: the good side's components (none) under each side's settings.
    """
    search = Search(oracle, good, bad, sources, lambda row, costs: None)
    changed = isolate.environment_diff(search.good, search.bad)
    settings, _ = settings_bisect.differing(search.good_settings, search.bad_settings)
    if not changed and not settings:
        return (
            "the last good and first bad runs recorded the same components: "
            "nothing to isolate (the change is in the case, the machine or unrecorded)"
        )
    found: dict[str, Configured | str] = {}
    if changed:
        for side, recorded in (("good", search.good), ("bad", search.bad)):
            made = search._held(search._spec({name: recorded.get(name) for name in changed}))
            found[side] = made if isinstance(made, Configured | str) else Configured(made)
        return found
    good_settings = applicable(search.good_settings)
    bad_settings = applicable(search.bad_settings)
    base = search._spec({})
    for side, applied in (("good", good_settings), ("bad", bad_settings)):
        found[side] = settings_bisect.configured(base, applied, good_settings, bad_settings)
    return found


def prepare_argv(provider: str, spec: EnvSpec) -> list[str]:
    """The command that prepares ``spec`` as the worker does: its provider, its cache."""
    return ["benchwatch", "prepare", "--provider", provider, spec.canonical()]


@dataclass(frozen=True)
class ProbeCommand:
    """The command suite as it runs in a prepared environment."""

    argv: list[str]
    cwd: str | None  # None: the current directory
    env: dict[str, str]  # the whole environment
    added: dict[str, str]  # what differs from the worker's (less its BENCHWATCH_* settings)
    removed: list[str]  # the worker's variables it runs without (PYTHONHOME, VIRTUAL_ENV)


def probe_command(
    suite: CommandSuite,
    prepared: Prepared | None,
    output: Path,
    settings: Mapping[str, Any] | None = None,
) -> ProbeCommand:
    """The suite's command in ``prepared`` (None: before it is), under compiler ``settings``.

    One shard of one writing into ``output``, as a probe runs it (``Oracle._run``).
    """
    base = worker_environment()
    env = command_environment(suite, output, 0, 1)
    if prepared is not None:
        env = probe_environment(prepared, env)
    env = settings_environment(env, settings or {})
    added = {name: value for name, value in env.items() if base.get(name) != value}
    removed = sorted(set(base) - set(env))
    return ProbeCommand(list(suite.command), suite.cwd, env, added, removed)
