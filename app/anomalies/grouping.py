"""Alert groups: which group a finding joins, and the environment diff it carries.

A finding joins the oldest group of its machine, channel and project whose first bad run
started within ``GROUP_WINDOW`` of its own (a silenced group holds its finding alone), else
opens one; detection (``service``), failing cases and aggregates (``aggregate_findings``)
all group through here, so one bad nightly is one notice.
"""

from collections.abc import Sequence
from datetime import timedelta
from typing import Any, NamedTuple

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.anomalies import explain
from app.anomalies.models import AlertGroup, CaseFailure
from app.runs.models import Run
from app.runs.reads import get_run

GROUP_WINDOW = timedelta(hours=36)  # first bad runs this close share one alert group

RunCache = dict[int, Run]  # the runs one pass has read, by id: a group's runs are read once


class Grouped(NamedTuple):
    """Where a finding goes, and what changed between its two runs."""

    group: AlertGroup
    environment_diff: dict[str, Any]


def run_of(session: Session, cache: RunCache, run_id: int) -> Run:
    """The run, read once per pass."""
    if run_id not in cache:
        cache[run_id] = get_run(session, run_id)
    return cache[run_id]


def environment(run: Run) -> dict[str, Any]:
    """The run's environment as ``explain.diff_environments`` compares it."""
    env = run.environment
    fields = {name: getattr(env, name) for name in explain.ENVIRONMENT_FIELDS}
    return {**fields, "packages": env.packages, "compiler_options": env.compiler_options}


def assign(
    session: Session, cache: RunCache, first_bad_run_id: int, last_good_run_id: int
) -> Grouped:
    """The group of a finding between these two runs, with their environment diff."""
    first_bad = run_of(session, cache, first_bad_run_id)
    last_good = run_of(session, cache, last_good_run_id)
    diff = environment_diff(session, cache, first_bad_run_id, last_good_run_id)
    return Grouped(group_for(session, first_bad, last_good, diff), diff)


def environment_diff(
    session: Session, cache: RunCache, first_bad_run_id: int, last_good_run_id: int
) -> dict[str, Any]:
    """What changed in the environment from the last good run to the first bad one."""
    first_bad = run_of(session, cache, first_bad_run_id)
    last_good = run_of(session, cache, last_good_run_id)
    return explain.diff_environments(environment(last_good), environment(first_bad))


def group_failures(session: Session, opened: Sequence[CaseFailure], run: Run) -> None:
    """Each new failure into the alert group of its run's window, as regressions are."""
    runs: RunCache = {run.id: run}
    for failure in opened:
        failure.group = assign(session, runs, run.id, failure.last_passing_run_id).group
        session.add(failure)  # only once grouped: group_id is required


def group_for(
    session: Session, first_bad: Run, last_good: Run, environment_diff: dict[str, Any]
) -> AlertGroup:
    """The open window's group of the first bad run's place, or a new one."""
    query = (
        select(AlertGroup)
        .join(Run, AlertGroup.first_bad_run_id == Run.id)
        .where(
            AlertGroup.machine_id == first_bad.machine_id,
            AlertGroup.channel == first_bad.channel,
            Run.project == first_bad.project,  # a group is one project's
            ~AlertGroup.silences.any(),  # a silence's group holds it alone
            Run.started_at.between(
                first_bad.started_at - GROUP_WINDOW, first_bad.started_at + GROUP_WINDOW
            ),
        )
    )
    query = query.order_by(AlertGroup.id).limit(1)  # autoflush: this pass's groups count too
    if (group := session.scalar(query)) is not None:
        return group
    group = AlertGroup(
        machine_id=first_bad.machine_id,
        channel=first_bad.channel,
        first_bad_run_id=first_bad.id,
        last_good_run_id=last_good.id,
        environment_diff=environment_diff,
    )
    session.add(group)
    return group
