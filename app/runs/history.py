"""A run's history: the runs before it that its failures, aggregates and pool are judged against."""

from sqlalchemy import Select, select

from app.runs.models import INVALID, Run


def earlier_runs(run: Run, limit: int, *, same_tier: bool = False) -> Select[int]:
    """The ids of up to ``limit`` runs started before ``run``, newest first.

    Only the same machine, channel and project count (another project's runs on the machine
    hold other models: never its history), and never an invalidated run. ``same_tier`` keeps
    to runs of the run's tier, which report the same cases.
    """
    query = select(Run.id).where(
        Run.machine_id == run.machine_id,
        Run.channel == run.channel,
        Run.project == run.project,
        Run.status != INVALID,
        Run.started_at < run.started_at,
    )
    if same_tier:
        query = query.where(Run.tier == run.tier)
    return query.order_by(Run.started_at.desc(), Run.id.desc()).limit(limit)
