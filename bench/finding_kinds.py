"""Failure, silence and aggregate findings on synthetic histories, scored for ``detection.py``.

``detection.py`` describes the corpora and the scoring, puts the repository root on
``sys.path`` and prints the ``KindScore`` rows made here. Nothing here touches a database:
failures are judged by ``app.anomalies.failures.judge`` run by run, as ``rescan_runs`` does,
silences by ``app.anomalies.silence.Cadence.silent`` at each sweep, and aggregates by
``app.anomalies.aggregate_rules.judge_series`` run by run, as detection after each run does.
"""

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import numpy as np
import numpy.typing as npt

from app.anomalies import aggregate_rules, failures, silence
from app.anomalies.detectors import REFINE_RADIUS
from app.anomalies.failures import Outcome
from app.anomalies.models import AggregateFinding, CaseFailure
from app.summaries.aggregates import ModelRecord

CHANNEL = "nightly"
FAILURE_STREAM, SILENCE_STREAM = 1, 2  # rng keys [seed, stream, index]: apart from the steps'

# --- failures -------------------------------------------------------------------------------

RUNS = 60  # runs of the one machine and channel, ids 1..RUNS
CASES_PER_KIND = 40
CASE_KINDS = ("breaks", "recovers", "alternating", "random", "flaky_breaks", "stable")
CASE_LABELS = {
    "breaks": "failure: starts failing",
    "recovers": "failure: fails, recovers",
    "alternating": "flaky: alternating",
    "random": "flaky: random 30%",
    "flaky_breaks": "flaky, then starts failing",
    "stable": "stable: always passes",
}
FLAKY_P = 0.3  # a random flaky case's failure rate
SKIP_P = 0.03  # a case only skipped in a run (no outcome); never at a true start
FAILURE_MODES = (
    ("failed", "latency_ms", "CUDA out of memory"),
    ("failed", "latency_ms", "timeout after 1800 s"),
    ("failed", "compile_time_s", "RuntimeError: inductor lowering"),
    ("accuracy", "accuracy", "accuracy: fail_accuracy"),
)


@dataclass(frozen=True)
class FakeRun:
    """What ``failures.judge`` reads of a run."""

    id: int
    machine_id: int
    channel: str


@dataclass(frozen=True)
class Case:
    """One case's outcomes over the runs, and the truth about them (run ids, 1-based)."""

    index: int  # also its benchmark id
    kind: str
    outcomes: tuple[Outcome | None, ...]  # None: skipped in that run
    starts: tuple[int, ...] = ()  # runs where a lasting failure begins
    ends: tuple[int | None, ...] = ()  # the run it passes again, per start (None: never)
    flaky: tuple[int, int] | None = None  # flaky phase, runs [from, to)


def fail_mask(
    rng: np.random.Generator, kind: str
) -> tuple[list[bool], list[int], tuple[int, int] | None]:
    """Failing runs, lasting failures' starts and the flaky phase ``[from, to)``, by position."""
    fail = [False] * RUNS
    starts: list[int] = []
    phase: list[int] = []
    if kind == "breaks":
        starts = [int(rng.integers(12, RUNS - 5))]
        fail[starts[0] :] = [True] * (RUNS - starts[0])
    elif kind == "recovers":
        at, length = int(rng.integers(12, RUNS - 15)), int(rng.integers(1, 11))
        starts = [at]
        fail[at : at + length] = [True] * length
    elif kind in ("alternating", "random"):
        at = int(rng.integers(12, RUNS - 20))
        phase = [at, RUNS]
        for p in range(at, RUNS):
            fail[p] = (p - at) % 2 == 0 if kind == "alternating" else bool(rng.random() < FLAKY_P)
        fail[at] = True
    elif kind == "flaky_breaks":
        at, length = int(rng.integers(12, 25)), 2 * int(rng.integers(4, 7))
        phase = [at, at + length]  # fails, passes, ..., passes; then fails for good
        for p in range(at, at + length, 2):
            fail[p] = True
        starts = [at + length]
        fail[at + length :] = [True] * (RUNS - at - length)
    return fail, starts, (phase[0], phase[1]) if phase else None


def make_case(seed: int, index: int) -> Case:
    """Case ``index`` of the failure corpus of ``seed``."""
    rng = np.random.default_rng([seed, FAILURE_STREAM, index])
    kind = CASE_KINDS[index % len(CASE_KINDS)]
    failure, metric, reason = FAILURE_MODES[int(rng.integers(len(FAILURE_MODES)))]
    fail, starts, flaky = fail_mask(rng, kind)
    skips = rng.random(RUNS) < SKIP_P
    outcomes: list[Outcome | None] = []
    for p in range(RUNS):
        if kind in ("breaks", "recovers", "stable") and skips[p] and p not in starts:
            outcomes.append(None)
        else:
            outcomes.append(Outcome(False, failure, metric, reason) if fail[p] else Outcome(True))
    ends = [
        next((q + 1 for q in range(s + 1, RUNS) if (o := outcomes[q]) and o.passed), None)
        for s in starts
    ]
    return Case(
        index,
        kind,
        tuple(outcomes),
        tuple(s + 1 for s in starts),
        tuple(ends),
        (flaky[0] + 1, flaky[1] + 1) if flaky else None,
    )


def walk_failures(cases: Sequence[Case]) -> dict[int, list[CaseFailure]]:
    """Judge every run in order as ``failures.rescan_runs`` does; the findings by case."""
    known: dict[int, list[CaseFailure]] = defaultdict(list)
    window: list[tuple[int, dict[int, Outcome]]] = []  # newest first
    for p in range(RUNS):
        run = FakeRun(p + 1, 1, CHANNEL)
        now = {c.index: o for c in cases if (o := c.outcomes[p]) is not None}
        judged = failures.judge(run, now, window, known)  # type: ignore[arg-type]
        for finding in judged.opened:
            known[finding.benchmark_id].append(finding)
        window = [(run.id, now), *window][: failures.HISTORY_RUNS]
    return known


@dataclass
class CaseScore:
    """One case's findings against its truth."""

    case: Case
    findings: list[CaseFailure]
    correct: int = 0  # findings of a true failure, or the two a flaky phase may have
    delays: list[int] = field(default_factory=list)  # runs late, per true failure found
    ended_right: int = 0  # true failures found whose end is the case's passing again
    flaky_delay: int | None = None  # runs from the flaky phase's start to its flaky finding


def score_case(case: Case, findings: list[CaseFailure]) -> CaseScore:
    """Match findings to the truth.

    A finding inside a lasting failure (from its start to its passing again) is true, once
    per failure. Inside a flaky phase, the first finding (nothing yet says flaky) and the
    first finding marked flaky are correct; every other finding is a false one.
    """
    score = CaseScore(case, findings)
    used: set[int] = set()
    first_seen = False
    for f in sorted(findings, key=lambda f: f.first_failing_run_id):
        at = f.first_failing_run_id
        true = [
            j
            for j, (s, e) in enumerate(zip(case.starts, case.ends, strict=True))
            if j not in used and s <= at < (e or RUNS + 1)
        ]
        if true:
            used.add(true[0])
            score.correct += 1
            score.delays.append(at - case.starts[true[0]])
            score.ended_right += f.passing_again_run_id == case.ends[true[0]]
        elif case.flaky and case.flaky[0] <= at < case.flaky[1]:
            if f.flaky and score.flaky_delay is None:
                score.flaky_delay = at - case.flaky[0]
                score.correct += 1
            elif not first_seen:
                score.correct += 1
            first_seen = True
    return score


@dataclass(frozen=True)
class KindScore:
    """One row of the findings table."""

    kind: str
    cases: int
    findings: int
    correct: int  # findings that are true (precision's numerator)
    truths: int  # what recall counts
    found: int
    delays: tuple[float, ...]
    unit: str  # of the delays
    per_case: tuple[int, ...]  # findings per case
    note: str = ""


def failure_row(label: str, scores: list[CaseScore]) -> KindScore:
    """The row of some cases: recall over lasting failures, else over flaky phases told."""
    lasting = sum(len(s.case.starts) for s in scores)
    flaky = [s for s in scores if s.case.flaky]
    told = sum(s.flaky_delay is not None for s in flaky)
    found = sum(len(s.delays) for s in scores)
    ended = sum(s.ended_right for s in scores)
    notes = []
    if lasting:
        notes.append(f"ended right {ended}/{found}")
    if flaky:
        notes.append(f"told flaky {told}/{len(flaky)}")
    if lasting:
        truths, delays = lasting, [float(d) for s in scores for d in s.delays]
    else:  # flaky phases only: told flaky, and when
        truths, found = len(flaky), told
        delays = [float(s.flaky_delay) for s in flaky if s.flaky_delay is not None]
    return KindScore(
        kind=label,
        cases=len(scores),
        findings=sum(len(s.findings) for s in scores),
        correct=sum(s.correct for s in scores),
        truths=truths,
        found=found,
        delays=tuple(delays),
        unit="runs",
        per_case=tuple(len(s.findings) for s in scores),
        note=", ".join(notes),
    )


def failure_scores(seed: int) -> list[KindScore]:
    """Rows per case kind, then all cases (recall there over lasting failures only)."""
    cases = [make_case(seed, i) for i in range(CASES_PER_KIND * len(CASE_KINDS))]
    found = walk_failures(cases)
    scores = [score_case(c, found.get(c.index, [])) for c in cases]
    rows = [
        failure_row(CASE_LABELS[kind], [s for s in scores if s.case.kind == kind])
        for kind in CASE_KINDS
    ]
    whole = failure_row("failures: all", scores)
    return [*rows, whole]


# --- silent machines ------------------------------------------------------------------------

MACHINES_PER_KIND = 20
MACHINE_KINDS = ("regular", "missed", "stops")
EVERY_HOURS = (12, 24)
DAYS = 30
JITTER = timedelta(hours=1)  # each run starts within +- this of its schedule
SWEEP = timedelta(minutes=10)  # jobs.sweep_silence's period
ORIGIN = datetime(2026, 1, 1, tzinfo=UTC)
HORIZON = ORIGIN + timedelta(days=DAYS)
STOP_DAYS = (8, 20)  # a stopping machine's last run falls in these days


@dataclass(frozen=True)
class Machine:
    """One machine and channel's run start times, and the truth about them."""

    index: int  # also its machine id; run ids are 1-based positions
    kind: str
    every: timedelta
    starts: tuple[datetime, ...]
    missed: int = 0  # single runs left out


def make_machine(seed: int, index: int) -> Machine:
    """Machine ``index`` of the silence corpus of ``seed``."""
    rng = np.random.default_rng([seed, SILENCE_STREAM, index])
    kind = MACHINE_KINDS[index % len(MACHINE_KINDS)]
    every = timedelta(hours=EVERY_HOURS[(index // len(MACHINE_KINDS)) % len(EVERY_HOURS)])
    first = JITTER + every * float(rng.uniform(0, 1))
    count = int((HORIZON - JITTER - ORIGIN - first) / every) + 1
    starts = [ORIGIN + first + every * i + JITTER * float(rng.uniform(-1, 1)) for i in range(count)]
    missed = 0
    if kind == "missed":
        spots = np.arange(silence.CADENCE_RUNS, count - 1, 2)  # never two in a row
        gone = {int(i) for i in rng.choice(spots, int(rng.integers(1, 4)), replace=False)}
        starts = [t for i, t in enumerate(starts) if i not in gone]
        missed = len(gone)
    elif kind == "stops":
        stop = ORIGIN + timedelta(days=float(rng.uniform(*STOP_DAYS)))
        starts = [t for t in starts if t <= stop]
    return Machine(index, kind, every, tuple(starts), missed)


def cadence_of(machine_id: int, runs: Sequence[tuple[int, datetime]]) -> silence.Cadence | None:
    """The cadence of runs ``(id, started_at)``, as the sweep computes it."""
    newest = sorted(runs, key=lambda r: (r[1], r[0]), reverse=True)[: silence.CADENCE_RUNS]
    return silence.cadence_of(machine_id, CHANNEL, newest)


def walk_silence(machine: Machine) -> list[tuple[int, datetime]]:
    """Sweep every ``SWEEP`` to the horizon: ``(last run id, first sweep flagging it)``.

    A sweep sees the runs started by then; like ``open_silences``, one finding per last run.
    """
    runs = list(enumerate(machine.starts, 1))
    flagged = []
    for i, (run_id, started_at) in enumerate(runs):
        cadence = cadence_of(machine.index, runs[: i + 1])
        if cadence is None:
            continue
        until = runs[i + 1][1] if i + 1 < len(runs) else HORIZON
        sweep = ORIGIN + SWEEP * -((ORIGIN - started_at) // SWEEP)  # the first at or after it
        while sweep < until:
            if cadence.silent(sweep):
                flagged.append((run_id, sweep))
                break
            sweep += SWEEP
    return flagged


def silence_row(
    label: str, machines: list[Machine], found: dict[int, list[tuple[int, datetime]]]
) -> KindScore:
    """The row of some machines: a stopped machine's silence after its last run is true."""
    correct, delays = 0, []
    for m in machines:
        after_stop = [at for run_id, at in found[m.index] if run_id == len(m.starts)]
        if m.kind == "stops" and after_stop:
            correct += 1
            delays.append((after_stop[0] - m.starts[-1]) / timedelta(hours=1))
    stopped = sum(m.kind == "stops" for m in machines)
    missed = sum(m.missed for m in machines)
    return KindScore(
        kind=label,
        cases=len(machines),
        findings=sum(len(found[m.index]) for m in machines),
        correct=correct,
        truths=stopped,
        found=len(delays),
        delays=tuple(delays),
        unit="h",
        per_case=tuple(len(found[m.index]) for m in machines),
        note=f"{missed} single runs missed" if missed else "",
    )


def silence_scores(seed: int) -> list[KindScore]:
    """Rows: regular, single missed runs, stops (12- and 24-hourly apart), all machines."""
    machines = [make_machine(seed, i) for i in range(MACHINES_PER_KIND * len(MACHINE_KINDS))]
    found = {m.index: walk_silence(m) for m in machines}
    rows = [
        silence_row(label, [m for m in machines if m.kind == kind], found)
        for kind, label in (
            ("regular", "silence: regular"),
            ("missed", "silence: single missed runs"),
        )
    ]
    for hours in EVERY_HOURS:
        chosen = [m for m in machines if m.kind == "stops" and m.every == timedelta(hours=hours)]
        rows.append(silence_row(f"silence: stops, {hours}-hourly", chosen, found))
    rows.append(silence_row("silences: all", machines, found))
    return rows


# --- aggregates -----------------------------------------------------------------------------

AGGREGATE_STREAM = 3
GROUPS_PER_KIND = 8
AGGREGATE_KINDS = (
    "pass_rate",
    "speedup_big",
    "speedup_small",
    "compression",
    "compile_time",
    "recovers",
    "clean",
    "churn",
)
AGGREGATE_LABELS = {
    "pass_rate": "aggregate: models start failing",
    "speedup_big": "aggregate: speedup -7 to -12%",
    "speedup_small": "aggregate: speedup -3.5 to -4.5%",
    "compression": "aggregate: compression -12 to -20%",
    "compile_time": "aggregate: compile time +15 to +40%",
    "recovers": "aggregate: speedup drops, recovers",
    "clean": "aggregate: clean, model noise",
    "churn": "aggregate: clean, models come and go",
}
TRANSIENT_P = 0.003  # a model's chance of failing in one run, then passing again
ALWAYS_FAILING_P = 0.04  # a model failing in every run (never above 7% of the group)


@dataclass(frozen=True)
class Event:
    """A lasting change of one aggregate, runs ``[start, end)`` (1-based; end None: lasts)."""

    stat: str
    start: int
    end: int | None = None


@dataclass(frozen=True)
class ModelGroup:
    """One suite x config x precision x mode over the runs: its models' values, and the truth.

    Arrays are models x runs; a model absent from a run has NaN speedup.
    """

    index: int
    kind: str
    speedup: npt.NDArray[np.float64]  # 0: failed; NaN: absent
    compile_s: npt.NDArray[np.float64]
    compression: npt.NDArray[np.float64]
    events: tuple[Event, ...] = ()
    churn: int = 0  # models added or removed


def make_group(seed: int, index: int) -> ModelGroup:
    """Group ``index`` of the aggregate corpus of ``seed``: 20 to 60 models over ``RUNS`` runs.

    Each model has its own level (speedup log-normal around 1.35x, compile time around 60 s,
    compression 0.9 to 1.8x) and its own run-to-run noise (speedup 1-5%, compile time 3-8%,
    compression 1%); 4% of models fail in every run, any model fails in a single run with
    probability 0.3%.
    """
    rng = np.random.default_rng([seed, AGGREGATE_STREAM, index])
    kind = AGGREGATE_KINDS[index % len(AGGREGATE_KINDS)]
    n = int(rng.integers(20, 61))

    def levels(center: float, spread: float, noise: tuple[float, float]) -> npt.NDArray[np.float64]:
        level = center * np.exp(rng.normal(0, spread, n))
        cv = rng.uniform(*noise, n)
        return level[:, None] * (1 + cv[:, None] * rng.standard_normal((n, RUNS)))

    speedup = levels(1.35, 0.35, (0.01, 0.05))
    compile_s = levels(60.0, 0.6, (0.03, 0.08))
    compression = rng.uniform(0.9, 1.8, n)[:, None] * (1 + 0.01 * rng.standard_normal((n, RUNS)))
    failing = rng.random((n, RUNS)) < TRANSIENT_P
    always = rng.permutation(n)[: min(int(rng.binomial(n, ALWAYS_FAILING_P)), int(0.07 * n))]
    failing[always, :] = True
    start = int(rng.integers(15, 50))
    events: tuple[Event, ...] = ()
    churn = 0
    if kind == "pass_rate":
        passing = [m for m in range(n) if m not in set(always)]
        rate = (n - len(always)) / n
        target = float(rng.uniform(0.70, 0.87))
        breaking = rng.choice(passing, max(1, int(np.ceil((rate - target) * n))), replace=False)
        failing[breaking, start - 1 :] = True
        events = (Event("pass_rate", start),)
    elif kind in ("speedup_big", "speedup_small", "recovers"):
        low, high = {"speedup_big": (0.88, 0.93), "speedup_small": (0.955, 0.965)}.get(
            kind, (0.85, 0.92)
        )
        share = float(rng.uniform(0.3, 0.7))
        hit = rng.random(n) < share
        factor = float(rng.uniform(low, high)) ** (1 / max(hit.mean(), 1 / n))
        end = start + int(rng.integers(6, 16)) if kind == "recovers" else None
        speedup[hit, start - 1 : (end - 1 if end else RUNS)] *= factor
        events = (Event("geomean_speedup", start, end),)
    elif kind == "compression":
        compression[:, start - 1 :] *= float(rng.uniform(0.80, 0.88))
        events = (Event("mean_compression_ratio", start),)
    elif kind == "compile_time":
        compile_s[:, start - 1 :] *= float(rng.uniform(1.15, 1.4))
        events = (Event("mean_compile_time_s", start),)
    elif kind == "churn":
        churn = int(rng.integers(1, 4))
        for model in rng.choice(n, churn, replace=False):
            at = int(rng.integers(10, RUNS - 5))
            if rng.random() < 0.5:
                speedup[model, :at] = np.nan  # added at run ``at + 1``
            else:
                speedup[model, at:] = np.nan  # removed
    speedup[failing & ~np.isnan(speedup)] = 0.0
    return ModelGroup(index, kind, speedup, compile_s, compression, events, churn)


def group_records(group: ModelGroup, position: int) -> list[ModelRecord]:
    """What ``summaries.service.model_records`` gives for the group in one run."""
    records = []
    for model in range(len(group.speedup)):
        speedup = float(group.speedup[model, position])
        if speedup != speedup:
            continue  # absent from this run
        passed = speedup > 0
        records.append(
            ModelRecord(
                "torchbench",
                "cudagraphs",
                "amp",
                "training",
                f"model_{model}",
                speedup=speedup,
                accuracy="pass" if passed else "fail_to_run",
                compilation_latency=float(group.compile_s[model, position]) if passed else None,
                compression_ratio=float(group.compression[model, position]) if passed else None,
            )
        )
    return records


def walk_group(group: ModelGroup) -> list[tuple[AggregateFinding, int]]:
    """Judge every run in order as detection after each run does: ``(finding, run opened at)``."""
    known: dict[aggregate_rules.Key, list[AggregateFinding]] = defaultdict(list)
    histories: dict[aggregate_rules.Key, list[tuple[int, float]]] = defaultdict(list)
    opened: list[tuple[AggregateFinding, int]] = []
    previous: list[ModelRecord] | None = None
    for p in range(RUNS):
        records = group_records(group, p)
        values = aggregate_rules.stat_values(records)
        bases = aggregate_rules.base_values(records, previous) if previous else {}
        judged = aggregate_rules.AggregateChanges()
        for key in sorted(values):
            histories[key].append((p + 1, values[key].value))
            aggregate_rules.judge_series(
                key,
                histories[key][-AGGREGATE_HISTORY:],
                bases.get(key),
                known[key],
                judged,
                models=values[key].model_count,
                machine_id=1,
                channel=CHANNEL,
            )
        opened += [(f, p + 1) for f in judged.opened]
        previous = records
    return opened


AGGREGATE_HISTORY = 60  # aggregate_findings.HISTORY_RUNS


@dataclass
class GroupScore:
    """One group's findings against its truth."""

    group: ModelGroup
    findings: int = 0
    correct: int = 0
    found: int = 0  # events found on their own aggregate
    delays: list[int] = field(default_factory=list)
    ended_right: int = 0
    rules: dict[str, int] = field(default_factory=lambda: defaultdict(int))


def score_group(group: ModelGroup, opened: list[tuple[AggregateFinding, int]]) -> GroupScore:
    """Match findings to the group's events.

    A finding is true when its first bad run is within the detector's refinement radius of an
    event's start (and before its end), on the event's aggregate, or on any aggregate when
    models started failing (they leave every mean): once per event and aggregate. The event
    is found by the first true finding on its own aggregate; its delay is the runs from the
    event's start to the run that opened it; it ended right when it resolved within
    ``MIN_SEGMENT`` runs of the event's end (or is still open for a lasting event).
    """
    score = GroupScore(group, findings=len(opened))
    used: set[tuple[int, str]] = set()
    radius = REFINE_RADIUS
    for finding, at in sorted(opened, key=lambda pair: pair[1]):
        for number, event in enumerate(group.events):
            on_it = finding.stat == event.stat or event.stat == "pass_rate"
            inside = event.start - radius <= finding.first_bad_run_id < (event.end or RUNS + 1)
            if not (on_it and inside) or (number, finding.stat) in used:
                continue
            used.add((number, finding.stat))
            score.correct += 1
            if finding.stat == event.stat:
                score.found += 1
                score.delays.append(at - event.start)
                score.rules[finding.rule] += 1
                resolved = finding.resolved_run_id
                score.ended_right += (
                    resolved is None
                    if event.end is None
                    else resolved is not None
                    and event.end <= resolved < event.end + aggregate_rules.MIN_SEGMENT
                )
            break
    return score


def aggregate_row(label: str, scores: list[GroupScore]) -> KindScore:
    """The row of some groups: recall over their events."""
    found = sum(s.found for s in scores)
    rules: dict[str, int] = defaultdict(int)
    for s in scores:
        for rule, count in s.rules.items():
            rules[rule] += count
    notes = [f"found by {', '.join(f'{r} {c}' for r, c in sorted(rules.items()))}"] if rules else []
    if found:
        notes.append(f"ended right {sum(s.ended_right for s in scores)}/{found}")
    if churn := sum(s.group.churn for s in scores):
        notes.append(f"{churn} models added or removed")
    return KindScore(
        kind=label,
        cases=len(scores),
        findings=sum(s.findings for s in scores),
        correct=sum(s.correct for s in scores),
        truths=sum(len(s.group.events) for s in scores),
        found=found,
        delays=tuple(float(d) for s in scores for d in s.delays),
        unit="runs",
        per_case=tuple(s.findings for s in scores),
        note=", ".join(notes),
    )


def aggregate_scores(seed: int) -> list[KindScore]:
    """Rows per group kind, then all groups."""
    groups = [make_group(seed, i) for i in range(GROUPS_PER_KIND * len(AGGREGATE_KINDS))]
    scores = [score_group(g, walk_group(g)) for g in groups]
    rows = [
        aggregate_row(AGGREGATE_LABELS[kind], [s for s in scores if s.group.kind == kind])
        for kind in AGGREGATE_KINDS
    ]
    return [*rows, aggregate_row("aggregates: all", scores)]
