"""Failure findings: a case that passed and now fails, judged after each run.

A case is a benchmark on a machine and channel; in one run it *fails* when one of its results
has status ``failed`` (an error, OOM, a timeout) or its accuracy result stops passing, and it
*passes* when it has results and none fails (a case only skipped is not judged). Compared
with the same case in the runs before (``HISTORY_RUNS`` of the machine, channel and project:
two projects sharing a machine are judged apart, as their series are):

- passing, then failing: a ``CaseFailure`` opens, with the last passing run and the reason;
- failing, then passing: the open one ends (``passing_again_run_id``);
- a case that flipped ``FLAKY_FLIPS`` times in its last ``HISTORY_RUNS`` runs is flaky: its
  failure is marked so, and once a flaky finding of the case exists, a flip opens nothing
  while the case keeps flipping that often (ten quiet runs, and it is judged afresh);
- a case known to be flaky that now fails ``STEADY_FAILS`` runs in a row, with nothing open,
  has stopped flipping and started failing: that opens a (not flaky) finding.

Detection of one run is idempotent: a finding already opened at the run is not opened again.

Coverage changes (``judge_coverage``) are findings too, of lower severity: a case is
*reported* by a run when it has any result there (skipped too). A run is compared with the
previous run of the machine, channel and project at the same tier (``Run.tier``; runs without
one with each other), so a smoke run after a full one is not a loss of coverage, nor another
project's run with its own models, and only within the suites both report, so a run of one
suite loses nothing of another:

- a case the previous run reported and this one does not is ``removed``;
- a case this one reports that the machine, channel and project never reported before is
  ``added`` (and so never in their first run, or a tier's);
- the cases of one model in one suite make one finding (on the model's first case, by id;
  its reason counts them); more than ``COVERAGE_MODELS`` models of a suite at once (a crashed
  or cut-down run, a new suite version) make one finding for the suite, naming a few;
- a coverage finding ends when its case reports again in a later run (any tier).

Only the difference of two runs' case lists is judged, and whether the new cases were ever
reported is asked of the candidates alone, so the cost grows with the run, not the history.
"""

from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence, Set
from dataclasses import dataclass, field
from itertools import pairwise
from typing import NamedTuple

from sqlalchemy import Select, exists, or_, select
from sqlalchemy.orm import Session

from app.anomalies.models import CaseFailure
from app.benchmarks.models import Benchmark, Metric, Series
from app.benchmarks.vocabulary import PASSING_ACCURACY
from app.core.bulk import member_of
from app.runs.history import earlier_runs, place_runs
from app.runs.models import Result, Run
from app.runs.reads import list_projects

HISTORY_RUNS = 10  # earlier runs of the machine and channel a case is compared with
RESCAN_BATCH = 50  # runs whose outcomes a rescan reads at once
FLAKY_FLIPS = 3  # pass/fail changes in them (and this run) that make a case flaky
STEADY_FAILS = 5  # failing runs in a row that turn a flaky case into a failing one
COVERAGE_MODELS = 5  # models of a suite told one by one when they come or go at once; more: one
COVERAGE_NAMED = 5  # models a suite's coverage finding names
COVERAGE = CaseFailure.COVERAGE


@dataclass(frozen=True)
class Outcome:
    """A case in one run: whether it passed; if not, how (``failed``/``accuracy``) and why."""

    passed: bool
    failure: str = ""
    metric: str = ""
    reason: str = ""


def outcomes(
    session: Session, run_ids: Sequence[int], benchmark_ids: Sequence[int] | None = None
) -> dict[int, dict[int, Outcome]]:
    """Per run, each case's outcome (by benchmark id); cases only skipped are left out.

    ``benchmark_ids``: only these cases (read in chunks: a run may hold 100,000s).
    """
    query = (
        select(
            Result.run_id,
            Series.benchmark_id,
            Metric.name,
            Result.status,
            Result.text_value,
            Result.reason,
        )
        .join(Series, Result.series_id == Series.id)
        .join(Metric, Series.metric_id == Metric.id)
        .where(Result.run_id.in_(run_ids))
        .order_by(Result.run_id, Series.benchmark_id, Metric.name)
    )
    queries = (
        [query]
        if benchmark_ids is None
        else [
            query.where(condition)
            for condition in member_of(session, Series.benchmark_id, sorted(benchmark_ids))
        ]
    )
    found: dict[int, dict[int, Outcome]] = defaultdict(dict)
    for one in queries:
        for run_id, benchmark_id, metric, status, text, reason in session.execute(one):
            _note(found[run_id], benchmark_id, metric, status, text, reason)
    return found


def _note(
    case: dict[int, Outcome],
    benchmark_id: int,
    metric: str,
    status: str,
    text: str | None,
    reason: str,
) -> None:
    """One result into its case's outcome: the first failure found is the one told."""
    if status == "skipped" or (benchmark_id in case and not case[benchmark_id].passed):
        return  # skipped says nothing
    if status == "failed":
        case[benchmark_id] = Outcome(False, "failed", metric, reason or "failed")
    elif metric == "accuracy" and text is not None and text not in PASSING_ACCURACY:
        case[benchmark_id] = Outcome(False, "accuracy", metric, f"accuracy: {text}")
    else:
        case.setdefault(benchmark_id, Outcome(True))


@dataclass
class FailureChanges:
    """What judging one run's cases found."""

    opened: list[CaseFailure]
    passing_again: list[CaseFailure]


def judge_run(session: Session, run: Run) -> FailureChanges:
    """Open failures for the run's newly failing cases and end those passing again.

    The new findings are not in the session yet: the caller groups them, and adds them.
    """
    earlier = list(session.scalars(earlier_runs(run, HISTORY_RUNS)))
    now = outcomes(session, [run.id]).get(run.id, {})
    known = _relevant_findings(session, run)
    judged = FailureChanges([], [])
    if now:
        # History matters only for the cases failing now (did they pass before? flaky?).
        failing = [b for b, outcome in now.items() if not outcome.passed]
        before = outcomes(session, earlier, failing) if earlier and failing else {}
        judged = judge(run, now, [(r, before.get(r, {})) for r in earlier], known)
    changed = judge_coverage(run, _coverage(session, run, known), known)
    return FailureChanges(
        judged.opened + changed.opened, judged.passing_again + changed.passing_again
    )


def judge(
    run: Run,
    now: Mapping[int, Outcome],
    earlier: Sequence[tuple[int, Mapping[int, Outcome]]],
    known: Mapping[int, list[CaseFailure]],
) -> FailureChanges:
    """The judgement of one run's cases (pure: no I/O).

    Args:
        run: the run judged.
        now: its cases' outcomes, by benchmark id.
        earlier: the runs before it (newest first, at most ``HISTORY_RUNS``), each with its
            cases' outcomes.
        known: the failures recorded for these cases of the machine and channel (a new one
            is appended, so that a walk through a history sees its own findings).
    """
    judged = FailureChanges([], [])
    for benchmark_id, outcome in now.items():
        history = [cases[benchmark_id] for _, cases in earlier if benchmark_id in cases]
        previous = history[0] if history else None  # the newest earlier outcome
        recorded = [f for f in known.get(benchmark_id, []) if f.failure not in COVERAGE]
        open_ = [f for f in recorded if f.passing_again_run_id is None]
        if outcome.passed:
            for finding in open_:
                if finding.first_failing_run_id != run.id:
                    finding.passing_again_run_id = run.id
                    judged.passing_again.append(finding)
            continue
        if any(f.first_failing_run_id == run.id for f in recorded):
            continue  # judged before (a retried detection, a rescan)
        if open_ or previous is None:
            continue  # still failing, or never seen
        flaky_before = any(f.flaky for f in recorded)
        if not previous.passed and not _steadily_failing(outcome, history, flaky_before):
            continue  # failing before too (or never seen passing)
        flips = _flips([outcome, *history])
        if previous.passed and flips >= FLAKY_FLIPS and flaky_before:
            continue  # known flaky: told once
        last_passing = next(
            (r for r, cases in earlier if benchmark_id in cases and cases[benchmark_id].passed),
            None,
        )
        if last_passing is None:
            continue
        judged.opened.append(
            CaseFailure(
                benchmark_id=benchmark_id,
                machine_id=run.machine_id,
                channel=run.channel,
                last_passing_run_id=last_passing,
                first_failing_run_id=run.id,
                failure=outcome.failure,
                metric=outcome.metric,
                reason=outcome.reason[:2000],
                flaky=previous.passed and flips >= FLAKY_FLIPS,
                status="new",
            )
        )
    return judged


def _steadily_failing(outcome: Outcome, history: Sequence[Outcome], flaky: bool) -> bool:
    """A flaky case whose last ``STEADY_FAILS`` runs (this one first) all failed, exactly."""
    streak = [outcome, *history[:STEADY_FAILS]]
    failing = [not o.passed for o in streak]
    return flaky and len(streak) > STEADY_FAILS and failing == [True] * STEADY_FAILS + [False]


def _flips(history: Sequence[Outcome]) -> int:
    return sum(1 for a, b in pairwise(history) if a.passed != b.passed)


def _of_project(query: Select[CaseFailure], project: str) -> Select[CaseFailure]:
    """Only the findings whose first failing run is of ``project``: a finding is its run's."""
    return query.join(Run, CaseFailure.first_failing_run_id == Run.id).where(Run.project == project)


def _findings(
    session: Session, machine_id: int, channel: str, project: str
) -> dict[int, list[CaseFailure]]:
    """Every failure recorded for a machine, channel and project, by case."""
    query = select(CaseFailure).where(
        CaseFailure.machine_id == machine_id, CaseFailure.channel == channel
    )
    return _by_case(_of_project(query, project), session)


def _relevant_findings(session: Session, run: Run) -> dict[int, list[CaseFailure]]:
    """The failures of the run's machine, channel and project that judging it can depend on.

    Those still open (they may end), the flaky ones (a flaky case is told once), and those
    opened at this run (judged already): not the many that ended long ago.
    """
    query = select(CaseFailure).where(
        CaseFailure.machine_id == run.machine_id,
        CaseFailure.channel == run.channel,
        or_(
            CaseFailure.passing_again_run_id.is_(None),
            CaseFailure.flaky.is_(True),
            CaseFailure.first_failing_run_id == run.id,
        ),
    )
    return _by_case(_of_project(query, run.project), session)


def _by_case(query: Select[CaseFailure], session: Session) -> dict[int, list[CaseFailure]]:
    found: dict[int, list[CaseFailure]] = defaultdict(list)
    for finding in session.scalars(query.order_by(CaseFailure.id)):
        found[finding.benchmark_id].append(finding)
    return found


def rescan_runs(
    session: Session, machine_id: int, channel: str, project: str | None = None
) -> Iterator[tuple[Run, FailureChanges]]:
    """Judge every run of a machine and channel in time order, as if each had just arrived.

    One project's runs (``project``), or each project's of the machine and channel in turn
    (None). Outcomes are read in batches and kept for the last ``HISTORY_RUNS`` runs only; the
    cases reported, for coverage, one run at a time, and kept for each tier's newest run. What
    a run's judgement opens must be added to the session (grouped) before the next is judged.
    """
    projects = [project] if project is not None else list_projects(session, machine_id, channel)
    for one in projects:
        yield from _rescan_project(session, machine_id, channel, one)


def _rescan_project(
    session: Session, machine_id: int, channel: str, project: str
) -> Iterator[tuple[Run, FailureChanges]]:
    """``rescan_runs`` of one project's runs on the machine and channel."""
    runs = list(session.scalars(place_runs(machine_id, channel, project)))
    known = _findings(session, machine_id, channel, project)
    window: list[tuple[int, Mapping[int, Outcome]]] = []  # newest first
    last_of_tier: dict[str, tuple[int, Mapping[int, Case]]] = {}  # each tier's newest run's cases
    seen: set[int] = set()  # the cases reported so far
    for start in range(0, len(runs), RESCAN_BATCH):
        batch = runs[start : start + RESCAN_BATCH]
        read = outcomes(session, [r.id for r in batch])
        for run in batch:
            now = read.get(run.id, {})
            judged = judge(run, now, window, known)
            coverage = Coverage(cases_of(session, run.id))  # one run at a time: they are large
            if (last := last_of_tier.get(run.tier)) is not None:
                coverage.previous_run_id, coverage.previous = last
                coverage.seen_before = seen.intersection(coverage.candidates())
            changed = judge_coverage(run, coverage, known)
            judged.opened += changed.opened
            judged.passing_again += changed.passing_again
            for finding in judged.opened:
                known[finding.benchmark_id].append(finding)
            yield run, judged
            window = [(run.id, now), *window][:HISTORY_RUNS]
            seen.update(coverage.now)
            last_of_tier[run.tier] = (run.id, coverage.now)


class Case(NamedTuple):
    """What a coverage finding says of a case: its suite and model."""

    suite: str
    model: str


@dataclass
class Coverage:
    """A run's cases, and what they are compared with."""

    now: Mapping[int, Case]  # by benchmark id: every case the run reported
    previous_run_id: int | None = None  # the previous comparable run (None: there is none)
    previous: Mapping[int, Case] = field(default_factory=dict)
    seen_before: Set[int] = frozenset()  # of the cases new against it, those reported earlier

    def candidates(self) -> list[int]:
        """The run's cases the previous run did not report, in the suites both reported."""
        suites = _suites(self.now) & _suites(self.previous)
        return sorted(
            b for b, c in self.now.items() if c.suite in suites and b not in self.previous
        )


def cases_of(session: Session, run_id: int) -> dict[int, Case]:
    """Every case a run reported (any result, skipped too), by benchmark id."""
    query = (
        select(Series.benchmark_id, Benchmark.suite, Benchmark.model)
        .select_from(Result)
        .join(Series, Result.series_id == Series.id)
        .join(Benchmark, Series.benchmark_id == Benchmark.id)
        .where(Result.run_id == run_id)
        .distinct()
    )
    return {b: Case(suite, model) for b, suite, model in session.connection().execute(query)}


def _coverage(session: Session, run: Run, known: Mapping[int, list[CaseFailure]]) -> Coverage:
    """The run's cases and the previous comparable run's; nothing read when neither matters."""
    previous = session.scalar(earlier_runs(run, 1, same_tier=True))
    if previous is None and not any(_open_coverage(f) for fs in known.values() for f in fs):
        return Coverage({})
    coverage = Coverage(cases_of(session, run.id))
    if previous is not None:
        coverage.previous_run_id, coverage.previous = previous, cases_of(session, previous)
        coverage.seen_before = _reported_before(session, run, coverage.candidates())
    return coverage


def _reported_before(session: Session, run: Run, benchmark_ids: Sequence[int]) -> set[int]:
    """Those of the cases the machine, channel and project reported before the run started.

    One index probe per series (the first earlier result is enough), not their histories.
    """
    found: set[int] = set()
    if not benchmark_ids:
        return found
    earlier = exists().where(Result.series_id == Series.id, Result.measured_at < run.started_at)
    for condition in member_of(session, Series.benchmark_id, benchmark_ids):
        query = (
            select(Series.benchmark_id)
            .where(
                Series.machine_id == run.machine_id,
                Series.channel == run.channel,
                Series.project == run.project,
                condition,
                earlier,
            )
            .distinct()
        )
        found.update(session.scalars(query))
    return found


def judge_coverage(
    run: Run, coverage: Coverage, known: Mapping[int, list[CaseFailure]]
) -> FailureChanges:
    """Coverage findings of one run: cases removed or added, and those reported again (pure).

    Args:
        run: the run judged.
        coverage: its cases, and the previous comparable run's.
        known: the findings recorded for the machine and channel's cases (at least the open
            ones and those opened at this run); a new one is not added to it.
    """
    judged = FailureChanges([], [])
    for benchmark_id, recorded in known.items():
        if benchmark_id in coverage.now:
            for finding in recorded:
                if _open_coverage(finding) and finding.first_failing_run_id != run.id:
                    finding.passing_again_run_id = run.id
                    judged.passing_again.append(finding)
    if coverage.previous_run_id is None:
        return judged
    suites = _suites(coverage.now) & _suites(coverage.previous)
    removed = {
        b: c for b, c in coverage.previous.items() if c.suite in suites and b not in coverage.now
    }
    added = {b: coverage.now[b] for b in coverage.candidates() if b not in coverage.seen_before}
    for kind, cases in (("removed", removed), ("added", added)):
        for first, ids, reason in _coverage_findings(kind, cases):
            opened_here = (
                f.failure == kind and f.first_failing_run_id == run.id
                for b in ids
                for f in known.get(b, [])
            )
            if any(opened_here):
                continue  # judged before (a retried detection, a rescan)
            judged.opened.append(
                CaseFailure(
                    benchmark_id=first,
                    machine_id=run.machine_id,
                    channel=run.channel,
                    last_passing_run_id=coverage.previous_run_id,
                    first_failing_run_id=run.id,
                    failure=kind,
                    metric="",
                    reason=reason,
                    flaky=False,
                    status="new",
                )
            )
    return judged


def _coverage_findings(kind: str, cases: Mapping[int, Case]) -> list[tuple[int, list[int], str]]:
    """The findings one kind of change makes, per model or per suite.

    Each: the case it is recorded on (the first-named model's first, by id), all its cases,
    and its reason.
    """
    by_suite: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for benchmark_id, case in cases.items():
        by_suite[case.suite][case.model].append(benchmark_id)
    verb = "no longer reported" if kind == "removed" else "newly reported"
    findings = []
    for suite, models in sorted(by_suite.items()):
        if len(models) > COVERAGE_MODELS:
            ids = [b for model_ids in models.values() for b in model_ids]
            named = sorted(models)[:COVERAGE_NAMED]
            more = f" and {len(models) - len(named)} more" if len(models) > len(named) else ""
            findings.append(
                (
                    min(models[named[0]]),
                    ids,
                    f"{len(models)} models of {suite} {verb} ({len(ids)} cases):"
                    f" {', '.join(named)}{more}",
                )
            )
            continue
        for model, ids in sorted(models.items()):
            count = f" ({len(ids)} cases of {model})" if len(ids) > 1 else ""
            findings.append((min(ids), ids, f"{verb}{count}"))
    return findings


def _open_coverage(finding: CaseFailure) -> bool:
    return finding.failure in COVERAGE and finding.passing_again_run_id is None


def _suites(cases: Mapping[int, Case]) -> set[str]:
    return {case.suite for case in cases.values()}
