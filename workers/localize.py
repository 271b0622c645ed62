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
commits of its clone in ``BENCHWATCH_LOCALIZE_SOURCES``, the commit bisection between them
(``git rev-list good..bad``, ``app.localization.bisect``). Each probe is reported as it is
judged, the references once their pre-flight is done and again at the end with all their
samples. Nothing here writes a run: probes are never results.
"""

import re
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from app.benchmarks import vocabulary as vocab
from app.benchmarks.models import CASE_IDENTITY
from app.core.command_suites import CommandSuite
from app.core.providers import BUILTIN_PROVIDER, COMMIT_PATTERN, Component, EnvSpec
from app.localization import bisect, isolate
from app.localization.judge import Reproduction
from app.localization.lifecycle import Costs, ProbeRow
from app.localization.probing import BuildFailed, Localization, Measure, ProbeRecord
from app.runs.schemas import ResultIn
from workers.command_suite import command_environment, read_outputs
from workers.provider_process import PrepareStopped
from workers.providers import Environments, Prepared, probe_environment
from workers.shard_runner import run_command_process

# Recorded beside a component: the commit it was built from (one component, not two).
COMMIT_FIELDS = {"torch": "torch_git_sha"}
# The machine's own: the built-in provider cannot swap them (an operator's may).
MACHINE_COMPONENTS = ("python", "cuda", "hip", "driver")
# A version that names its commit: setuptools-scm's 1.2.dev3+g1a2b3c4, torch's 2.6.0a0+git1a2b3c4.
VERSION_COMMIT = re.compile(r"(?:^|[+.])g(?:it)?([0-9a-f]{7,40})(?:$|[.+])")
Report = Callable[[ProbeRow, Costs], None]
S = TypeVar("S")


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
    samples: list[float] = field(default_factory=list)
    rounds: int = 0
    failure: str | None = None


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
            builds=len(self.measured),
            samples=sum(len(m.samples) for m in self.measured.values()),
        )

    def samples(self, spec: EnvSpec) -> list[float]:
        """Every sample measured in ``spec``'s environment so far."""
        found = self.measured.get(spec.canonical())
        return list(found.samples) if found else []

    def strategy(self, to_spec: Callable[[S], EnvSpec | str]) -> Measure[S]:
        """The oracle one strategy sees, samples another strategy measured given first.

        ``to_spec`` makes the strategy's spec an environment (a str: why it cannot be one).
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

    def _grow(self, spec: EnvSpec, total: int) -> _Environment:
        found = self.measured.setdefault(spec.canonical(), _Environment())
        if found.failure is not None or len(found.samples) >= total:
            return found
        prepared = self._prepare(spec)
        if isinstance(prepared, str):
            found.failure = prepared
            return found
        while len(found.samples) < total:
            got = self._run(prepared)
            found.rounds += 1
            if isinstance(got, str):
                found.failure = got
                break
            found.samples.extend(got)
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

    def _run(self, prepared: Prepared) -> list[float] | str:
        """One run of the command suite in the environment: the case's samples, or why none."""
        measuring, suite = self.measuring, self.measuring.suite
        with tempfile.TemporaryDirectory(prefix="benchwatch-probe-") as folder:
            output = Path(folder) / "output"
            output.mkdir()
            env = probe_environment(prepared, command_environment(suite, output, 0, 1))
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
        return case_samples(outcome.rows, self.case)


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


class Clone:
    """A component's local git clone: its recorded versions as commits, and commits' titles."""

    def __init__(self, path: str) -> None:
        """The clone at ``path`` (``BENCHWATCH_LOCALIZE_SOURCES``)."""
        self.path = path

    def git(self, *args: str) -> str | None:
        """A git command's output in the clone, or None when it failed."""
        done = subprocess.run(
            ["git", "-C", self.path, *args], capture_output=True, text=True, timeout=120
        )
        return done.stdout.strip() if done.returncode == 0 else None

    def commit_of(self, recorded: str) -> str | None:
        """The full commit a recorded version (or commit) names in this clone, or None."""
        names = [recorded] if re.match(COMMIT_PATTERN, recorded) else []
        if match := VERSION_COMMIT.search(recorded):
            names.append(match.group(1))
        for name in names:
            if found := self.git("rev-parse", "--verify", "--quiet", f"{name}^{{commit}}"):
                return found
        return None

    def between(self, good: str, bad: str) -> list[str] | str:
        """The commits from ``good`` to ``bad``, both ends included, oldest first; or why not."""
        listed = self.git("rev-list", "--reverse", f"{good}..{bad}")
        if listed is None:
            return f"git rev-list {good}..{bad} failed in {self.path}"
        commits = listed.split()
        if not commits or commits[-1] != bad:
            return f"{bad} does not descend from {good} in {self.path}"
        return [good, *commits]

    def describe(self, commit: str) -> dict[str, str]:
        """A commit's title, author and date; its link where the clone's origin is a forge."""
        shown = self.git("log", "-1", "--format=%s%x1f%an <%ae>%x1f%cI", commit) or ""
        title, author, date = ([*shown.split("\x1f"), "", "", ""])[:3]
        found = {"commit": commit, "title": title, "author": author, "date": date}
        if (origin := self.git("remote", "get-url", "origin")) and (web := _web(origin)):
            found["link"] = f"{web}/commit/{commit}"
        return found


def _web(origin: str) -> str | None:
    """A clone's origin as its web address (https or scp-like git@host:owner/repo)."""
    if match := re.match(r"^git@([\w.-]+):(.+?)(?:\.git)?$", origin):
        return f"https://{match.group(1)}/{match.group(2)}"
    if match := re.match(r"^https?://(?:[^@/]+@)?([\w.-]+/.+?)(?:\.git)?/?$", origin):
        return f"https://{match.group(1)}"
    return None


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
        good: Mapping[str, str],
        bad: Mapping[str, str],
        sources: Mapping[str, str],
        report: Report,
    ) -> None:
        """Search between the recorded ``good`` and ``bad`` components; ``report`` each probe."""
        self.oracle, self.report = oracle, report
        self.sources = {name: Clone(path) for name, path in sources.items()}
        self.good, self.good_commits = _folded(good)
        self.bad, self.bad_commits = _folded(bad)
        self.higher_is_better: bool | None = oracle.case.get("higher_is_better")
        self.probe_count = 0
        self._reference_of: dict[str, tuple[str, str]] = {}  # environment -> who reports it
        self._resolved: dict[tuple[str, str], str | None] = {}

    def run(self) -> Found:
        """The search, strategy by strategy, to what it found."""
        changed = isolate.environment_diff(self.good, self.bad)
        if not changed:
            reason = (
                "the last good and first bad runs recorded the same components: "
                "nothing to isolate (the change is in the case, the machine or unrecorded)"
            )
            return self._found("inconclusive", reason, {})
        good = {name: self.good.get(name) for name in changed}
        bad = {name: self.bad.get(name) for name in changed}
        isolated = isolate.isolate_components(
            good,
            bad,
            self.oracle.strategy(self._spec),
            higher_is_better=self.higher_is_better,
            on_probe=self._reporter("isolate", good, bad, self._spec),
        )
        self._references_of("isolate", good, bad, self._spec)
        strategies = [_summary(isolated)]
        summary = {"strategies": strategies, "preflight": _preflight(isolated.preflight)}
        if isolated.state != "culprit_found" or len(isolated.culprit) != 1:
            culprit = _components(isolated.culprit, self.good, self.bad)
            answer = summary | {"strategy": isolated.strategy} | culprit
            return self._found(isolated.state, isolated.reason, answer)
        name = isolated.culprit[0]
        component = _components((name,), self.good, self.bad)
        commits = self._commits(name)
        if isinstance(commits, str):
            answer = summary | {"strategy": isolated.strategy, "notes": [commits]} | component
            return self._found("culprit_found", isolated.reason, answer)
        clone = self.sources[name]

        def at(commit: str) -> EnvSpec | str:
            return self._spec({**good, name: None}, {name: commit})

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
        to_spec: Callable[[Any], EnvSpec | str],
        clone: Clone | None = None,
    ) -> Callable[[ProbeRecord], None]:
        def report(record: ProbeRecord) -> None:
            self._references_of(strategy, good, bad, to_spec, clone)  # their pre-flight is over
            self.probe_count += 1
            spec = _named(record.spec)
            label = record.label
            if clone is not None:  # a commit: its title beside it
                label = f"{label[:12]} {clone.describe(label)['title']}"
            row = ProbeRow.of(strategy, record, spec)
            row = ProbeRow(**{**asdict(row), "label": label})
            self.report(row, self.oracle.costs(self.probe_count))

        return report

    def _references_of(
        self,
        strategy: str,
        good: Any,
        bad: Any,
        to_spec: Callable[[Any], EnvSpec | str],
        clone: Clone | None = None,
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
            )
            self.report(row, self.oracle.costs(self.probe_count))

    def _found(self, state: str, reason: str, answer: dict[str, Any]) -> Found:
        return Found(state, reason, answer, self.oracle.costs(self.probe_count))


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
