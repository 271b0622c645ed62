"""Aggregate findings stored: each run's aggregate points written, judged, grouped, explained.

The rules are ``aggregate_rules`` (pure, shared with ``bench/finding_kinds.py``); here a
run's points are computed from its stored results (``summaries.service.model_records``) and
kept as ``AggregatePoint`` rows, each aggregate's history is read back from them, and what
opens is put in the alert group of its first bad run (``grouping``, as regressions
and failures are) with the per-model findings that explain it.
"""

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from app.anomalies import grouping
from app.anomalies.aggregate_rules import (
    BASE_RULES,
    AggregateChanges,
    Candidate,
    Key,
    Value,
    base_values,
    explains,
    judge_series,
    rescan_steps,
    stat_values,
)
from app.anomalies.models import AggregateFinding, AggregatePoint, CaseFailure, Regression
from app.benchmarks.models import Benchmark, CompilerConfig, Machine, Metric, Series
from app.core.bulk import chunks
from app.runs.history import earlier_runs, place_runs
from app.runs.models import Run
from app.runs.reads import list_projects
from app.summaries import service as summaries_service
from app.summaries.aggregates import GroupKey, ModelRecord

HISTORY_RUNS = 60  # runs of the machine, channel and project whose points a judgement reads
RESCAN_BATCH = 50  # runs whose stored points a rescan reads at once


def judge_run(session: Session, run: Run) -> AggregateChanges:
    """Store the run's aggregate points, judge them, group and explain what opens.

    Reads the run's results once (``summaries.service.model_records``), the points of the
    ``HISTORY_RUNS`` runs before it of its machine, channel and project (another project's
    runs on the machine have other models: never its history), and, for the base of the speedup
    and compression rules, the results of each group's previous run (one read per distinct
    run, not per group). Runs detected before aggregate points existed have none: the
    history starts later (a rescan fills it).
    """
    records = summaries_service.model_records(session, run.id)
    values = stat_values(records)
    _store_points(session, run, values, _points_of(session, [run.id]).get(run.id, {}))
    if not values:
        return AggregateChanges()
    earlier = list(session.scalars(earlier_runs(run, HISTORY_RUNS - 1)))[::-1]
    stored = _points_of(session, earlier)
    histories = {
        key: [(r, p[key].value) for r in earlier if key in (p := stored.get(r, {}))]
        + [(run.id, value.value)]
        for key, value in values.items()
    }
    bases = _bases(session, records, values, histories)
    known = _known(session, run, [*earlier, run.id])
    judged = AggregateChanges()
    for key in sorted(values):
        judge_series(
            key,
            histories[key],
            bases.get(key),
            known[key],
            judged,
            models=values[key].model_count,
            machine_id=run.machine_id,
            channel=run.channel,
        )
    _group(session, judged.opened)
    # Per-model steps are confirmed within a few runs of their first bad one: the findings
    # of the runs read may gain explanations, older open ones no longer do.
    window = {*earlier, run.id}
    _explain(
        session, [f for found in known.values() for f in found if f.first_bad_run_id in window]
    )
    return judged


def _points_of(session: Session, run_ids: Sequence[int]) -> dict[int, dict[Key, AggregatePoint]]:
    """The stored points of some runs, by run and aggregate."""
    found: dict[int, dict[Key, AggregatePoint]] = defaultdict(dict)
    for part in chunks(run_ids):
        for point in session.scalars(select(AggregatePoint).where(AggregatePoint.run_id.in_(part))):
            key = (point.suite, point.config, point.precision, point.mode, point.stat)
            found[point.run_id][key] = point
    return found


def _store_points(
    session: Session, run: Run, values: Mapping[Key, Value], stored: Mapping[Key, AggregatePoint]
) -> None:
    """The run's points as ``values`` says (detecting a run again rewrites them in place)."""
    for key, value in values.items():
        point = stored.get(key)
        if point is None:
            suite, config, precision, mode, stat = key
            point = AggregatePoint(
                run_id=run.id,
                machine_id=run.machine_id,
                channel=run.channel,
                suite=suite,
                config=config,
                precision=precision,
                mode=mode,
                stat=stat,
            )
            session.add(point)
        point.value, point.model_count = value.value, value.model_count
    for key, point in stored.items():
        if key not in values:
            session.delete(point)


def _bases(
    session: Session,
    records: Sequence[ModelRecord],
    values: Mapping[Key, Value],
    histories: Mapping[Key, list[tuple[int, float]]],
) -> dict[Key, tuple[float, float]]:
    """``(base, new)`` of the rule-judged aggregates, each group against its previous run."""
    previous: dict[GroupKey, int] = {}
    for key in values:
        if key[4] in BASE_RULES and len(history := histories[key]) > 1:
            previous[key[:4]] = history[-2][0]
    by_run: dict[int, set[GroupKey]] = defaultdict(set)
    for group, run_id in previous.items():
        by_run[run_id].add(group)
    found: dict[Key, tuple[float, float]] = {}
    for run_id, groups in by_run.items():
        base = [r for r in summaries_service.model_records(session, run_id) if r.group in groups]
        new = [r for r in records if r.group in groups]
        found |= {k: v for k, v in base_values(new, base).items() if k[4] in BASE_RULES}
    return found


def _known(session: Session, run: Run, run_ids: Sequence[int]) -> dict[Key, list[AggregateFinding]]:
    """The findings judging the run can depend on, by aggregate.

    Those open and those opened in the history read (a step is not recorded twice), not
    later than the run (a run detected again late does not resolve what came after it).
    """
    query = (
        select(AggregateFinding)
        .join(Run, AggregateFinding.first_bad_run_id == Run.id)
        .where(
            AggregateFinding.machine_id == run.machine_id,
            AggregateFinding.channel == run.channel,
            Run.project == run.project,  # a finding is its first bad run's project's
            Run.started_at <= run.started_at,
            or_(
                AggregateFinding.resolved_run_id.is_(None),
                AggregateFinding.first_bad_run_id.in_(run_ids),
            ),
        )
        .order_by(AggregateFinding.id)
    )
    return _by_key(session.scalars(query))


def _by_key(findings: Iterable[AggregateFinding]) -> dict[Key, list[AggregateFinding]]:
    found: dict[Key, list[AggregateFinding]] = defaultdict(list)
    for finding in findings:
        found[_key_of(finding)].append(finding)
    return found


def _key_of(finding: AggregateFinding) -> Key:
    return (finding.suite, finding.config, finding.precision, finding.mode, finding.stat)


def _group(session: Session, opened: Sequence[AggregateFinding]) -> None:
    """Each new finding into the alert group of its first bad run's window, as regressions are."""
    runs: grouping.RunCache = {}
    for finding in opened:
        first_bad, last_good = finding.first_bad_run_id, finding.last_good_run_id
        finding.group = grouping.assign(session, runs, first_bad, last_good).group
        session.add(finding)  # only once grouped: group_id is required
    session.flush()


def rescan(session: Session, machine: str | None = None) -> AggregateChanges:
    """Every run of every machine, channel and project (of one machine, if given) in order.

    Each run's points are stored again from its results and the rules are walked run by run,
    as if each run had just arrived; the change-point detector runs once over each
    aggregate's whole history, as ``service.rescan`` runs it over a series. Twice adds nothing.
    """
    places = (
        select(Run.machine_id, Run.channel, Run.project)
        .distinct()
        .order_by(Run.machine_id, Run.channel, Run.project)
    )
    if machine is not None:
        places = places.join(Machine, Run.machine_id == Machine.id).where(Machine.name == machine)
    judged = AggregateChanges()
    for machine_id, channel, project in session.execute(places).all():
        _rescan_place(session, machine_id, channel, project, judged)
    return judged


def rescan_place(
    session: Session, machine_id: int, channel: str, project: str | None = None
) -> AggregateChanges:
    """One machine and channel's runs judged again in order (after a run was invalidated).

    One project's runs (``project``), or each project's of the machine and channel in turn.
    """
    judged = AggregateChanges()
    projects = [project] if project is not None else list_projects(session, machine_id, channel)
    for one in projects:
        _rescan_place(session, machine_id, channel, one, judged)
    return judged


def _rescan_place(
    session: Session, machine_id: int, channel: str, project: str, judged: AggregateChanges
) -> None:
    """One machine, channel and project's runs, oldest first (results read once per run)."""
    runs = list(session.scalars(place_runs(machine_id, channel, project)))
    recorded = session.scalars(
        select(AggregateFinding)
        .join(Run, AggregateFinding.first_bad_run_id == Run.id)
        .where(
            AggregateFinding.machine_id == machine_id,
            AggregateFinding.channel == channel,
            Run.project == project,
        )
        .order_by(AggregateFinding.id)
    ).all()
    pending: dict[int, list[AggregateFinding]] = defaultdict(list)  # by first bad run
    for finding in recorded:
        pending[finding.first_bad_run_id].append(finding)
    known: dict[Key, list[AggregateFinding]] = defaultdict(list)  # those reached by the walk
    histories: dict[Key, list[tuple[int, float]]] = defaultdict(list)
    latest: dict[GroupKey, list[ModelRecord]] = {}  # each group's records in its last run
    opened_before = len(judged.opened)
    for batch in chunks(runs, RESCAN_BATCH):
        stored = _points_of(session, [r.id for r in batch])
        for run in batch:
            for finding in pending.pop(run.id, []):
                known[_key_of(finding)].append(finding)
            records = summaries_service.model_records(session, run.id)
            values = stat_values(records)
            _store_points(session, run, values, stored.get(run.id, {}))
            by_group: dict[GroupKey, list[ModelRecord]] = defaultdict(list)
            for record in records:
                by_group[record.group].append(record)
            bases: dict[Key, tuple[float, float]] = {}
            for group in {k[:4] for k in values if k[4] in BASE_RULES} & latest.keys():
                bases |= base_values(by_group[group], latest[group])
            for key in sorted(values):
                histories[key].append((run.id, values[key].value))
                judge_series(
                    key,
                    histories[key][-HISTORY_RUNS:],
                    bases.get(key),
                    known[key],
                    judged,
                    models=values[key].model_count,
                    machine_id=machine_id,
                    channel=channel,
                    steps=False,
                )
            latest |= by_group
    for key, history in sorted(histories.items()):
        rescan_steps(key, history, known[key], judged, machine_id=machine_id, channel=channel)
    _group(session, judged.opened[opened_before:])
    _explain(session, [*recorded, *judged.opened[opened_before:]])


def _explain(session: Session, findings: Sequence[AggregateFinding]) -> None:
    """Renew each finding's ``explained_by`` from the per-model findings stored now."""
    started: dict[int, datetime] = {}
    projects: dict[int, str] = {}  # of the first bad runs: a finding is its run's project's
    for part in chunks(sorted({f.first_bad_run_id for f in findings})):
        query = select(Run.id, Run.started_at, Run.project).where(Run.id.in_(part))
        for row in session.execute(query):
            started[row.id], projects[row.id] = row.started_at, row.project
    by_place: dict[tuple[int, str, str], list[AggregateFinding]] = defaultdict(list)
    for finding in findings:
        place_key = (finding.machine_id, finding.channel, projects[finding.first_bad_run_id])
        by_place[place_key].append(finding)
    for (machine_id, channel, project), place in by_place.items():
        times = [started[f.first_bad_run_id] for f in place]
        span = (min(times) - grouping.GROUP_WINDOW, max(times) + grouping.GROUP_WINDOW)
        candidates = _candidates(session, machine_id, channel, project, span)
        for finding in place:
            at = started[finding.first_bad_run_id]
            found = [c for c in candidates if explains(finding, at, c, grouping.GROUP_WINDOW)]
            explained = {
                kind: sorted(c.id for c in found if c.kind == kind)
                for kind in ("regressions", "failures")
            }
            if finding.explained_by != explained:
                finding.explained_by = explained


def _candidates(
    session: Session, machine_id: int, channel: str, project: str, span: tuple[datetime, datetime]
) -> list[Candidate]:
    """The machine, channel and project's regressions for the worse and failures in ``span``.

    Coverage changes are left out: a model no longer reported leaves the pass rate's count,
    it does not lower it, and a new model that passes raises it.
    """
    regressions = (
        select(
            Regression.id,
            Regression.group_id,
            Benchmark.suite,
            CompilerConfig.name,
            Benchmark.precision,
            Benchmark.mode,
            Metric.name,
            Run.started_at,
        )
        .join(Series, Regression.series_id == Series.id)
        .join(Benchmark, Series.benchmark_id == Benchmark.id)
        .join(CompilerConfig, Benchmark.compiler_config_id == CompilerConfig.id)
        .join(Metric, Series.metric_id == Metric.id)
        .join(Run, Regression.first_bad_run_id == Run.id)
        .where(
            Series.machine_id == machine_id,
            Series.channel == channel,
            Series.project == project,
            Regression.direction == "regression",
            Regression.state != "withdrawn",
            Run.started_at.between(*span),
        )
    )
    failing = (
        select(
            CaseFailure.id,
            CaseFailure.group_id,
            Benchmark.suite,
            CompilerConfig.name,
            Benchmark.precision,
            Benchmark.mode,
            Run.started_at,
        )
        .join(Benchmark, CaseFailure.benchmark_id == Benchmark.id)
        .join(CompilerConfig, Benchmark.compiler_config_id == CompilerConfig.id)
        .join(Run, CaseFailure.first_failing_run_id == Run.id)
        .where(
            CaseFailure.machine_id == machine_id,
            CaseFailure.channel == channel,
            Run.project == project,
            CaseFailure.failure.not_in(CaseFailure.COVERAGE),
            Run.started_at.between(*span),
        )
    )
    found = [
        Candidate("regressions", id_, group_id, (s, c, p, m), metric, at)
        for id_, group_id, s, c, p, m, metric, at in session.execute(regressions)
    ]
    found += [
        Candidate("failures", id_, group_id, (s, c, p, m), "", at)
        for id_, group_id, s, c, p, m, at in session.execute(failing)
    ]
    return found
