"""The worker's side of a localization: the oracle that measures a probe, and the search.

A probe is an environment: the finding's last good or first bad environment with some
components swapped (component isolation), or with one component at a commit (commit
bisection). The oracle prepares it with the provider the worker names
(``BENCHWATCH_LOCALIZE_PROVIDER``, ``workers.providers``), runs the command suite that measures
the case in it (``probe_environment``) and reads the case's metric samples out of the rows the
command's files parse into; it runs the command again until it has the samples asked for. An
environment that cannot be prepared, or in which the command measures nothing of the case, is
``BuildFailed``: a probe's outcome (a bisection skips it), never an error.

Samples are kept per environment for the whole search: a strategy's references that an earlier
strategy measured (a bisection's ends are the isolation's good environment and its "good with
the component from bad") start from those samples, so a build is never made twice and each
sample counts once in the costs.

The search (``search``): the pre-flight and the component isolation over the environment diff
(``app.localization.isolate``); then, when the named component's good and bad versions map to
commits of its source in ``BENCHWATCH_LOCALIZE_SOURCES`` (a clone or a GitHub repository,
``workers.clones``), the commit bisection between them (``app.localization.bisect``). Each
probe is reported as it is judged, the references once their pre-flight is done and again at
the end with all their samples. Where the two runs' compiler settings differ and no component
explains the step, the compiler-setting bisection follows (``workers.settings_bisect``); until
then every probe is measured under the good run's settings. A configs localization (one case
under two configs of one run, ``workers.config_bisect``) is that bisection alone: its sides are
the two configs' settings, their own options included. Nothing here writes a run: probes are
never results.
"""

import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from app.benchmarks import vocabulary as vocab
from app.benchmarks.models import CASE_IDENTITY
from app.core.command_suites import CommandSuite
from app.core.providers import BUILTIN_PROVIDER, Component, EnvSpec
from app.localization import bisect, isolate
from app.localization.judge import Reproduction
from app.localization.lifecycle import Costs, ProbeRow
from app.localization.probing import BuildFailed, Localization, Measure, ProbeRecord
from app.runs.schemas import ResultIn
from workers import config_bisect, settings_bisect
from workers.clones import CommitSource
from workers.command_suite import command_environment, read_outputs
from workers.compiler_settings import Configured, settings_environment
from workers.github_commits import commit_source
from workers.provider_process import PrepareStopped
from workers.providers import Environments, Prepared, probe_environment
from workers.shard_runner import run_command_process

# Recorded beside a component: the commit it was built from (one component, not two).
COMMIT_FIELDS = {"torch": "torch_git_sha"}
# The machine's own: the built-in provider cannot swap them (an operator's may).
MACHINE_COMPONENTS = ("python", "cuda", "hip", "driver")
Report = Callable[[ProbeRow, Costs], None]
S = TypeVar("S")
Measured = EnvSpec | Configured  # an environment, or one under compiler settings
# Where a localization's environment keeps the run's compiler settings (app.localization).
SETTINGS = "compiler_options"


class Stopped(Exception):
    """The attempt lost its lease: another worker has the localization now."""


@dataclass(frozen=True)
class Measuring:
    """How the oracle measures: the provider, the command suite and the worker's limits."""

    environments: Environments
    provider: str
    suite: CommandSuite
    machine: str
    device: str
    timeout_s: float  # a command's, where the suite sets none
    max_bytes: int
    parse_timeout_s: float | None
    heartbeat: Callable[[], bool] = lambda: True
    every_s: float = 20.0


@dataclass
class _Environment:
    build: str  # the environment prepared (the same under other settings: one build)
    samples: list[float] = field(default_factory=list)
    rounds: int = 0
    failure: str | None = None
    profile: dict[str, Any] | None = None  # the case's kernel profile, of the last round


class Oracle:
    """Measures the case in prepared environments, each environment's samples kept."""

    def __init__(self, measuring: Measuring, case: Mapping[str, Any]) -> None:
        """Measure ``case`` (the localization's: identity, metric, unit) as ``measuring`` says."""
        self.measuring, self.case = measuring, case
        self.measured: dict[str, _Environment] = {}

    def costs(self, probe_count: int) -> Costs:
        """What the search has cost: environments prepared, repeats, samples."""
        return Costs(
            probe_count=probe_count,
            repeats=sum(max(m.rounds - 1, 0) for m in self.measured.values()),
            builds=len({m.build for m in self.measured.values()}),
            samples=sum(len(m.samples) for m in self.measured.values()),
        )

    def samples(self, spec: Measured) -> list[float]:
        """Every sample measured in ``spec``'s environment so far."""
        found = self.measured.get(spec.canonical())
        return list(found.samples) if found else []

    def profile(self, spec: Measured) -> dict[str, Any] | None:
        """The case's kernel profile in ``spec``'s environment, if its command gave one."""
        found = self.measured.get(spec.canonical())
        return found.profile if found else None

    def strategy(self, to_spec: Callable[[S], Measured | str]) -> Measure[S]:
        """The oracle one strategy sees, samples another strategy measured given first.

        ``to_spec`` makes the strategy's spec an environment, under compiler settings or not
        (a str: why it cannot be one).
        """
        given: dict[str, int] = {}

        def measure(spec: S, count: int) -> Sequence[float] | BuildFailed:
            made = to_spec(spec)
            if isinstance(made, str):
                return BuildFailed(made)
            key = made.canonical()
            start = given.get(key, 0)
            found = self._grow(made, start + count)
            if found.failure is not None:
                return BuildFailed(found.failure)
            given[key] = len(found.samples)
            return found.samples[start:]

        return measure

    def _grow(self, spec: Measured, total: int) -> _Environment:
        made = spec if isinstance(spec, Configured) else Configured(spec)
        found = self.measured.setdefault(made.canonical(), _Environment(made.spec.canonical()))
        if found.failure is not None or len(found.samples) >= total:
            return found
        prepared = self._prepare(made.spec)
        if isinstance(prepared, str):
            found.failure = prepared
            return found
        while len(found.samples) < total:
            got = self._run(prepared, made.settings)
            found.rounds += 1
            if isinstance(got, str):
                found.failure = got
                break
            samples, profile = got
            found.samples.extend(samples)
            found.profile = profile or found.profile
        return found

    def _prepare(self, spec: EnvSpec) -> Prepared | str:
        measuring = self.measuring
        try:
            made = measuring.environments.prepare(
                measuring.provider, spec, heartbeat=measuring.heartbeat, every_s=measuring.every_s
            )
        except PrepareStopped as stopped:
            raise Stopped(str(stopped)) from stopped
        if isinstance(made, Prepared):
            return made
        return f"does not build: {made.reason}"

    def _run(
        self, prepared: Prepared, settings: Mapping[str, Any]
    ) -> tuple[list[float], dict[str, Any] | None] | str:
        """One run of the command suite in the environment, under ``settings``.

        The case's samples and its kernel profile (None where the output had none), or why
        there are no samples.
        """
        measuring, suite = self.measuring, self.measuring.suite
        with tempfile.TemporaryDirectory(prefix="benchwatch-probe-") as folder:
            output = Path(folder) / "output"
            output.mkdir()
            env = probe_environment(prepared, command_environment(suite, output, 0, 1))
            env = settings_environment(env, settings)
            failed = run_command_process(
                suite.command,
                cwd=suite.cwd,
                env=env,
                logs=Path(folder),
                timeout_s=suite.timeout_s or measuring.timeout_s,
                heartbeat=measuring.heartbeat,
                every_s=measuring.every_s,
            )
            if failed is not None:
                if not measuring.heartbeat():
                    raise Stopped(failed)
                return f"the command failed in this environment: {failed}"
            outcome = read_outputs(
                suite,
                output,
                machine=measuring.machine,
                device=measuring.device,
                max_bytes=measuring.max_bytes,
                parse_timeout_s=measuring.parse_timeout_s,
            )
        if outcome.rows is None:
            return f"the command's output could not be read: {outcome.reason}"
        samples = case_samples(outcome.rows, self.case)
        if isinstance(samples, str):
            return samples
        return samples, case_profile(outcome.profiles, self.case)


PROFILE_KEY = ("suite", "model", "mode", "precision", "config", "batch_size")


def case_profile(
    profiles: Sequence[Mapping[str, Any]], case: Mapping[str, Any]
) -> dict[str, Any] | None:
    """The case's kernel profile among a probe's (its identity's; None where none is)."""
    for profile in profiles:
        if all(profile.get(name) == case.get(name) for name in PROFILE_KEY) and (
            profile.get("params") or {}
        ) == (case.get("params") or {}):
            return dict(profile)
    return None


def case_samples(rows: Sequence[Mapping[str, Any]], case: Mapping[str, Any]) -> list[float] | str:
    """The case's metric samples in its series' unit among ``rows``, or why there are none."""
    for row in rows:
        try:
            parsed = ResultIn.model_validate(row)
        except ValidationError:
            continue
        if any(getattr(parsed, name) != case.get(name) for name in CASE_IDENTITY):
            continue
        if "params" in case and (parsed.params or {}) != (case["params"] or {}):
            continue
        if parsed.metric != case.get("metric"):
            continue
        if parsed.status != "ok":
            return f"the case {parsed.status}: {parsed.reason or 'no reason given'}"
        values = parsed.samples or ([parsed.value] if parsed.value is not None else [])
        factor = 1.0
        unit, given = case.get("unit"), parsed.unit
        if unit and given and unit in vocab.UNITS and given in vocab.UNITS:
            factor = vocab.unit_factor(given, unit) or 1.0
        if values:
            return [float(value) * factor for value in values]
    what = f"{case.get('suite')}/{case.get('model')} {case.get('metric')}"
    return f"the command measured no {what} ({len(rows)} rows)"


@dataclass(frozen=True)
class Found:
    """What the search found, as the localization stores it."""

    state: str
    reason: str
    answer: dict[str, Any]
    costs: Costs


class Search:
    """One localization's search on this worker: isolation, then bisection where it can."""

    def __init__(
        self,
        oracle: Oracle,
        good: Mapping[str, Any],
        bad: Mapping[str, Any],
        sources: Mapping[str, str | CommitSource],
        report: Report,
    ) -> None:
        """Search between the recorded ``good`` and ``bad`` components; ``report`` each probe.

        Their compiler settings, where recorded, are the mapping under ``SETTINGS``.
        """
        self.oracle, self.report = oracle, report
        self.sources = {name: commit_source(value) for name, value in sources.items()}
        self.good_settings = _recorded_settings(good)
        self.bad_settings = _recorded_settings(bad)
        # Two configs compared: each side's settings with its config's own options and mode.
        self.configs = config_bisect.compared(oracle.case, self.good_settings, self.bad_settings)
        if self.configs is not None:
            self.good_settings, self.bad_settings = self.configs.good, self.configs.bad
        self.good, self.good_commits = _folded({k: v for k, v in good.items() if k != SETTINGS})
        self.bad, self.bad_commits = _folded({k: v for k, v in bad.items() if k != SETTINGS})
        self.higher_is_better: bool | None = oracle.case.get("higher_is_better")
        self.probe_count = 0
        self._reference_of: dict[str, tuple[str, str]] = {}  # environment -> who reports it
        self._resolved: dict[tuple[str, str], str | None] = {}

    def run(self) -> Found:
        """The search, strategy by strategy, to what it found."""
        changed = isolate.environment_diff(self.good, self.bad)
        settings, unapplied = settings_bisect.differing(self.good_settings, self.bad_settings)
        notes = [f"compiler settings no probe can apply differ: {', '.join(unapplied)}"]
        notes = notes if unapplied else []
        if not changed and not settings:
            reason = (
                "the last good and first bad runs recorded the same components: "
                "nothing to isolate (the change is in the case, the machine or unrecorded)"
            )
            reason = self.configs.same() if self.configs is not None else reason
            return self._found("inconclusive", reason, {"notes": notes} if notes else {})
        if not changed:
            return self._settings({}, None, notes)
        good = {name: self.good.get(name) for name in changed}
        bad = {name: self.bad.get(name) for name in changed}

        def held(environment: Mapping[str, str | None]) -> Measured | str:
            return self._held(self._spec(environment))

        isolated = isolate.isolate_components(
            good,
            bad,
            self.oracle.strategy(held),
            higher_is_better=self.higher_is_better,
            on_probe=self._reporter("isolate", good, bad, held),
        )
        self._references_of("isolate", good, bad, held)
        if settings and isolated.state in ("not_reproduced", "inconclusive"):
            return self._settings(good, isolated, notes)
        if settings:
            notes.append(
                f"compiler settings differ too ({', '.join(settings)}): not bisected, "
                "the components decided"
            )
        strategies = [_summary(isolated)]
        summary: dict[str, Any] = {
            "strategies": strategies,
            "preflight": _preflight(isolated.preflight),
        }
        summary |= {"notes": notes} if notes else {}
        if isolated.state != "culprit_found" or len(isolated.culprit) != 1:
            culprit = _components(isolated.culprit, self.good, self.bad)
            answer = summary | {"strategy": isolated.strategy} | culprit
            return self._found(isolated.state, isolated.reason, answer)
        name = isolated.culprit[0]
        component = _components((name,), self.good, self.bad)
        commits = self._commits(name)
        if isinstance(commits, str):
            answer = summary | {"strategy": isolated.strategy, "notes": [*notes, commits]}
            answer |= component
            return self._found("culprit_found", isolated.reason, answer)
        clone = self.sources[name]

        def at(commit: str) -> Measured | str:
            return self._held(self._spec({**good, name: None}, {name: commit}))

        bisected = bisect.bisect_commits(
            commits,
            self.oracle.strategy(at),
            higher_is_better=self.higher_is_better,
            on_probe=self._reporter("bisect", commits[0], commits[-1], at, clone),
        )
        self._references_of("bisect", commits[0], commits[-1], at, clone)
        strategies.append(_summary(bisected))
        answer = summary | {"strategy": bisected.strategy, "commits": len(commits) - 1}
        if bisected.state == "culprit_found":
            if bisected.ambiguous:
                culprit = {"kind": "commit_range", "component": name, "commits": bisected.culprit}
            else:
                culprit = {"kind": "commit", "component": name} | clone.describe(
                    bisected.culprit[0]
                )
            culprit |= {"good_commit": commits[0], "bad_commit": commits[-1]}
            return self._found("culprit_found", bisected.reason, answer | {"culprit": culprit})
        # The component stands; the commits between its versions could not be told apart.
        answer |= component | {"remaining": list(bisected.remaining)}
        reason = f"{isolated.reason}; its commits: {bisected.reason}"
        return self._found("culprit_found", reason, answer)

    def _settings(
        self, environment: Mapping[str, str | None], isolated: Localization | None, notes: list[str]
    ) -> Found:
        """The compiler-setting bisection in ``environment`` (the good side's components).

        After a component isolation that found none: its state stands unless the settings
        name a culprit (both not reproduced: not reproduced; else inconclusive).
        """
        good, bad = self.good_settings, self.bad_settings
        found, culprit = settings_bisect.bisect(
            self._spec(environment),
            good,
            bad,
            measure=self.oracle.strategy,
            reporter=lambda to_spec: self._reporter("settings", good, bad, to_spec),
            references=lambda to_spec: self._references_of("settings", good, bad, to_spec),
            higher_is_better=self.higher_is_better,
        )
        strategies = [_summary(isolated)] if isolated is not None else []
        answer: dict[str, Any] = {
            "strategies": [*strategies, _summary(found)],
            "preflight": _preflight(found.preflight),
            "strategy": found.strategy,
        }
        answer |= culprit | ({"notes": [*notes, *found.notes]} if notes or found.notes else {})
        state, reason = found.state, found.reason
        if isolated is not None and state != "culprit_found":
            both = isolated.state == state == "not_reproduced"
            state = "not_reproduced" if both else "inconclusive"
            reason = f"{isolated.reason}; compiler settings: {found.reason}"
        return self._found(state, reason, answer)

    def _held(self, made: EnvSpec | str) -> Measured | str:
        """An environment under the good run's compiler settings (none where none recorded)."""
        good = self.good_settings
        return settings_bisect.configured(made, good, good, self.bad_settings)

    def _commits(self, name: str) -> list[str] | str:
        """The commits between the component's good and bad versions, or why there are none."""
        clone = self.sources.get(name)
        if clone is None:
            return f"{name}: no clone in BENCHWATCH_LOCALIZE_SOURCES, its commits not bisected"
        ends = []
        for side, components, commits in (
            ("good", self.good, self.good_commits),
            ("bad", self.bad, self.bad_commits),
        ):
            recorded = commits.get(name) or components.get(name)
            commit = self._commit(name, recorded) if recorded else None
            if commit is None:
                return f"{name}: the {side} version {recorded!r} names no commit of {clone.path}"
            ends.append(commit)
        return clone.between(*ends)

    def _commit(self, name: str, recorded: str) -> str | None:
        key = (name, recorded)
        if key not in self._resolved:
            self._resolved[key] = self.sources[name].commit_of(recorded)
        return self._resolved[key]

    def _spec(
        self, environment: Mapping[str, str | None], commits: Mapping[str, str] | None = None
    ) -> EnvSpec | str:
        """The environment as a provider's spec: each component a commit or a version.

        A component with a clone is built from the commit its version names there (a version
        its clone does not know is installed as a version); ``commits`` sets some outright.
        """
        components: dict[str, Component] = {}
        for name, value in sorted(environment.items()):
            commit = (commits or {}).get(name)
            if commit is None and value is None:
                return f"{name} is absent on one side: a provider cannot take it away"
            if commit is None and value is not None and name in self.sources:
                commit = self._commit_for(name, value)
            try:
                if commit is not None:
                    components[name] = Component(commit=commit, source=self.sources[name].path)
                elif name in MACHINE_COMPONENTS and self._builtin:
                    return f"{name} is the machine's own: the pip provider cannot swap it"
                else:
                    components[name] = Component(version=value)
            except ValidationError as error:
                return f"{name} {value!r} is not a version a provider takes: {error.errors()[0]}"
        return EnvSpec(components=components)

    def _commit_for(self, name: str, value: str) -> str | None:
        """The commit of a component's version: the one recorded beside it, else its own."""
        for components, commits in ((self.good, self.good_commits), (self.bad, self.bad_commits)):
            if components.get(name) == value and name in commits:
                return self._commit(name, commits[name])
        return self._commit(name, value)

    @property
    def _builtin(self) -> bool:
        return self.oracle.measuring.provider == BUILTIN_PROVIDER

    def _reporter(
        self,
        strategy: str,
        good: Any,
        bad: Any,
        to_spec: Callable[[Any], Measured | str],
        clone: CommitSource | None = None,
    ) -> Callable[[ProbeRecord], None]:
        def report(record: ProbeRecord) -> None:
            self._references_of(strategy, good, bad, to_spec, clone)  # their pre-flight is over
            self.probe_count += 1
            spec = _named(record.spec)
            label = record.label
            if clone is not None:  # a commit: its title beside it
                label = f"{label[:12]} {clone.describe(label)['title']}"
            made = to_spec(record.spec)
            profile = None if isinstance(made, str) else self.oracle.profile(made)
            row = ProbeRow.of(strategy, record, spec)
            row = ProbeRow(**{**asdict(row), "label": label, "kernels": profile})
            self.report(row, self.oracle.costs(self.probe_count))

        return report

    def _references_of(
        self,
        strategy: str,
        good: Any,
        bad: Any,
        to_spec: Callable[[Any], Measured | str],
        clone: CommitSource | None = None,
    ) -> None:
        """The strategy's two references as probes, with every sample they have so far.

        A reference that an earlier strategy reported (the same environment) stays its own.
        """
        for side, spec in (("good", good), ("bad", bad)):
            made = to_spec(spec)
            if isinstance(made, str) or not (samples := self.oracle.samples(made)):
                continue
            key = made.canonical()
            if self._reference_of.setdefault(key, (strategy, side)) != (strategy, side):
                continue
            commit = f"{str(spec)[:12]} " if clone is not None else ""
            row = ProbeRow(
                strategy="preflight" if strategy == "isolate" else strategy,
                label=f"{commit}{'last good' if side == 'good' else 'first bad'} (reference)",
                spec=_named(spec),
                outcome="reference",
                samples=samples,
                rounds=self.oracle.measured[key].rounds,
                reason=f"the {side} reference of the {strategy} pre-flight",
                kernels=self.oracle.profile(made),
            )
            self.report(row, self.oracle.costs(self.probe_count))

    def _found(self, state: str, reason: str, answer: dict[str, Any]) -> Found:
        if self.configs is not None:
            answer = {"configs": self.configs.summary(), **answer}
        return Found(state, reason, answer, self.oracle.costs(self.probe_count))


def _recorded_settings(recorded: Mapping[str, Any]) -> dict[str, Any]:
    """The compiler settings an environment recorded (``SETTINGS``), or none."""
    found = recorded.get(SETTINGS)
    return dict(found) if isinstance(found, Mapping) else {}


def _folded(recorded: Mapping[str, str]) -> tuple[dict[str, str | None], dict[str, str]]:
    """The components without their commit fields, and those commits (torch: torch_git_sha)."""
    components: dict[str, str | None] = dict(recorded)
    commits = {}
    for name, commit_field in COMMIT_FIELDS.items():
        commit = components.pop(commit_field, None)
        if commit and name in components:
            commits[name] = commit
        elif commit:
            components[commit_field] = commit  # recorded without its component: one itself
    return components, commits


def _named(spec: object) -> dict[str, Any]:
    """A probe's spec as stored: an environment's components, or a commit."""
    if isinstance(spec, Mapping):
        return dict(spec)
    return {"commit": str(spec)}


def _components(
    names: Sequence[str], good: Mapping[str, str | None], bad: Mapping[str, str | None]
) -> dict[str, Any]:
    if not names:
        return {}
    versions = {name: [good.get(name), bad.get(name)] for name in names}
    return {"culprit": {"kind": "component", "names": list(names), "versions": versions}}


def _summary(found: Localization) -> dict[str, Any]:
    return {
        "strategy": found.strategy,
        "state": found.state,
        "reason": found.reason,
        "culprit": list(found.culprit),
        "remaining": list(found.remaining),
        "notes": list(found.notes),
        "probes": found.probe_count,
    }


def _preflight(found: Reproduction | None) -> dict[str, Any] | None:
    return asdict(found) if found is not None else None
