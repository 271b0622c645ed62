"""Measuring probes with adaptive repeats, and the record every strategy returns.

A strategy sees the world through an oracle, ``measure(spec, count)``: it prepares the
environment a spec names (a commit, a set of components, compiler settings), measures the
case ``count`` more times and returns the samples, or ``BuildFailed`` when the environment
cannot be prepared, which is a probe's outcome, not an error. Environments are cached by
spec, as a provider caches them: the first measurement of a spec is a build, the later
ones are repeats.

A probe is judged after ``SCHEDULE[0]`` samples; while it is unknown it is measured again,
its samples growing along the schedule up to the cap, and then "unknown" stands. The
references grow with it: a probe is never judged against fewer reference samples than it
has, so that a reference's median is as sure as the probe's.

A probe judged half-way is measured once more beside both references, one round of each in
turn, and that round alone decides. The references were measured when the pre-flight ran, the
probe minutes later: a machine whose load changed in between (on a 2-vCPU machine, a busy
neighbour on the other CPU slows a scalar kernel by half) moves the probe against references
that stayed as they were. Only half-way is checked: such a move, a share of the probe's own
time, takes a probe off its end of the step into the middle (a quarter of the step) long
before it takes it across to the other end (three quarters).
"""

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field, replace
from typing import Generic, Literal, TypeVar

from app.localization.judge import (
    SCHEDULE,
    Decision,
    Judgement,
    Reproduction,
    judge_probe,
    reproduces,
)

Spec = TypeVar("Spec")
State = Literal["culprit_found", "not_reproduced", "inconclusive", "failed"]
Outcome = Decision | Literal["build_failed"]


@dataclass(frozen=True)
class BuildFailed:
    """The oracle could not prepare the probe's environment (it does not build)."""

    reason: str


Measure = Callable[[Spec, int], Sequence[float] | BuildFailed]


@dataclass(frozen=True)
class ProbeRecord:
    """One probe: what it was, how it was judged, and on which samples."""

    label: str
    spec: object
    outcome: Outcome
    judgement: Judgement | None  # None for a build that failed
    samples: tuple[float, ...]
    rounds: int  # measurements of this spec (1: no repeat)
    reason: str


OnProbe = Callable[[ProbeRecord], None]


@dataclass(frozen=True)
class Localization:
    """What a strategy found, with every probe and what it cost.

    ``culprit``: one name (a component, a commit, a setting), several that only together
    move the case (a pair of components, a set of settings), or a commit range whose
    commits did not build (the first bad is one of them). ``remaining``: for an
    inconclusive bisection, the commits the culprit is still among.
    """

    strategy: str
    state: State
    culprit: tuple[str, ...]
    reason: str
    preflight: Reproduction | None
    probes: tuple[ProbeRecord, ...]
    probe_count: int  # probes judged, references left out
    repeats: int  # measurements beyond each spec's first, references included
    builds: int  # specs prepared, references and failed builds included
    samples: int  # samples measured in all
    remaining: tuple[str, ...] = ()
    ambiguous: bool = False  # the culprit is a range of unbuildable commits
    notes: tuple[str, ...] = ()


@dataclass
class _Measured:
    samples: list[float] = field(default_factory=list)
    rounds: int = 0
    failure: str | None = None


class Prober(Generic[Spec]):
    """Measures specs through an oracle, caches them by key, and judges probes."""

    def __init__(
        self,
        measure: Measure[Spec],
        key: Callable[[Spec], Hashable],
        higher_is_better: bool | None,
        schedule: Sequence[int] = SCHEDULE,
        on_probe: OnProbe | None = None,
    ) -> None:
        """Probe through ``measure``; ``key`` tells which specs are the same environment.

        ``on_probe`` is told of each probe as it is judged (a worker stores it at once, so
        that a long search shows its progress).
        """
        if not schedule or list(schedule) != sorted(set(schedule)) or schedule[0] < 1:
            raise ValueError("the schedule is a rising list of sample counts")
        self._measure, self._key = measure, key
        self.higher_is_better = higher_is_better
        self.schedule = tuple(schedule)
        self._measured: dict[Hashable, _Measured] = {}
        self._records: dict[Hashable, ProbeRecord] = {}
        self._order: list[ProbeRecord] = []
        self._references: tuple[Spec, Spec] | None = None
        self._on_probe = on_probe

    @property
    def records(self) -> tuple[ProbeRecord, ...]:
        """The probes judged so far, in order."""
        return tuple(self._order)

    def _grow(self, spec: Spec, total: int) -> _Measured:
        """Measure ``spec`` until it has ``total`` samples (or has failed to build)."""
        measured = self._measured.setdefault(self._key(spec), _Measured())
        if measured.failure is None and len(measured.samples) < total:
            got = self._measure(spec, total - len(measured.samples))
            measured.rounds += 1
            if isinstance(got, BuildFailed):
                measured.failure = got.reason
            elif len(got) == 0:
                measured.failure = "the measurement returned no samples"
            else:
                measured.samples.extend(float(x) for x in got)
        return measured

    def preflight(self, good: Spec, bad: Spec) -> Reproduction | BuildFailed:
        """Measure both references side by side, growing, until the step shows or the cap."""
        found: Reproduction | None = None
        for total in self.schedule:
            sides = self._grow(good, total), self._grow(bad, total)
            for name, side in zip(("good", "bad"), sides, strict=True):
                if side.failure is not None:
                    return BuildFailed(f"the {name} reference failed: {side.failure}")
            found = reproduces(sides[0].samples, sides[1].samples, self.higher_is_better)
            if found.reproduced:
                break
        assert found is not None, "the schedule is not empty"
        self._references = (good, bad)
        return found

    def probe(self, label: str, spec: Spec) -> ProbeRecord:
        """Judge one probe, repeating while it is unknown (a spec judged before: its record)."""
        assert self._references is not None, "the pre-flight comes first"
        if (known := self._records.get(self._key(spec))) is not None:
            return known
        judgement: Judgement | None = None
        for total in self.schedule:
            measured = self._grow(spec, total)
            if measured.failure is not None:
                break
            good, bad = (self._grow(s, len(measured.samples)) for s in self._references)
            judgement = judge_probe(measured.samples, good.samples, bad.samples)
            if judgement.decision != "unknown":
                break
        if judgement is not None and judgement.decision == "halfway":
            judgement = self._side_by_side(spec, judgement)
        if measured.failure is not None or judgement is None:
            failure = measured.failure or "not measured"
            record = ProbeRecord(
                label, spec, "build_failed", None, (), measured.rounds, f"build failed: {failure}"
            )
        else:
            record = ProbeRecord(
                label,
                spec,
                judgement.decision,
                judgement,
                tuple(measured.samples),
                measured.rounds,
                judgement.reason,
            )
        self._records[self._key(spec)] = record
        self._order.append(record)
        if self._on_probe is not None:
            self._on_probe(record)
        return record

    def _side_by_side(self, spec: Spec, first: Judgement) -> Judgement:
        """The half-way probe judged again on one fresh round of it and both references."""
        assert self._references is not None
        fresh: list[list[float]] = []
        for side in (spec, *self._references):
            measured = self._measured[self._key(side)]
            before = len(measured.samples)
            self._grow(side, before + self.schedule[0])
            if measured.failure is not None:
                return first
            fresh.append(measured.samples[before:])
        again = judge_probe(*fresh)
        return replace(again, reason=f"side by side again, {again.reason}; first {first.reason}")

    def result(
        self,
        strategy: str,
        state: State,
        reason: str,
        preflight: Reproduction | None,
        culprit: Sequence[str] = (),
        *,
        remaining: Sequence[str] = (),
        ambiguous: bool = False,
        notes: Sequence[str] = (),
    ) -> Localization:
        """The localization as it stands, with the probes so far and their costs."""
        return Localization(
            strategy=strategy,
            state=state,
            culprit=tuple(culprit),
            reason=reason,
            preflight=preflight,
            probes=tuple(self._order),
            probe_count=len(self._order),
            repeats=sum(max(m.rounds - 1, 0) for m in self._measured.values()),
            builds=len(self._measured),
            samples=sum(len(m.samples) for m in self._measured.values()),
            remaining=tuple(remaining),
            ambiguous=ambiguous,
            notes=tuple(notes),
        )


def start(
    prober: "Prober[Spec]", strategy: str, good: Spec, bad: Spec
) -> Reproduction | Localization:
    """The pre-flight of a strategy: its reproduction, or the localization that ends there."""
    found = prober.preflight(good, bad)
    if isinstance(found, BuildFailed):
        return prober.result(strategy, "failed", found.reason, None)
    if not found.reproduced:
        return prober.result(strategy, "not_reproduced", found.reason, found)
    return found
