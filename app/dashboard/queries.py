"""Read-only selects that more than one page needs: machines, their channels, newest runs."""

from sqlalchemy import String, cast, select
from sqlalchemy.orm import Session

from app.benchmarks.models import Machine
from app.benchmarks.service import list_machines
from app.runs.branches import is_branch_channel
from app.runs.history import place_runs
from app.runs.models import Run


def machine_names(session: Session, project: str | None = None) -> list[str]:
    """Every machine's name (with a series of ``project``, if given), sorted."""
    return [machine.name for machine in list_machines(session, project)]


def machine_device(session: Session, name: str | None) -> str:
    """The device of a machine (to name its configs as its users do); empty when unknown."""
    return session.scalar(select(Machine.device).where(Machine.name == name)) or ""


def machine_channels(session: Session, machine: str, project: str | None = None) -> list[str]:
    """The channels a machine has runs on, of a project if given (not the branch channels)."""
    query = select(Run.channel).join(Machine).where(Machine.name == machine).distinct()
    if project is not None:
        query = query.where(Run.project == project)
    return sorted(c for c in session.scalars(query) if not is_branch_channel(c))


def default_channel(channels: list[str]) -> str:
    """The channel a page opens on: nightly when there is one, else the first."""
    return "nightly" if "nightly" in channels or not channels else channels[0]


def recent_runs(
    session: Session, machine: str, channel: str, limit: int, project: str | None = None
) -> list[Run]:
    """A machine's newest runs on a channel (of a project, if given), newest first.

    Invalidated runs are left out.
    """
    machine_id = select(Machine.id).where(Machine.name == machine).scalar_subquery()
    return list(
        session.scalars(place_runs(machine_id, channel, project, newest_first=True, limit=limit))
    )


def has_demo_data(session: Session) -> bool:
    """Whether a machine says it is demo data (``extra.demo``, as ``benchwatch demo`` writes).

    Every page asks, so the database hands over only the ``extra`` of machines whose JSON
    names a ``demo`` key (none outside a demo), not every machine; any true value counts.
    """
    named = select(Machine.extra).where(cast(Machine.extra, String).contains('"demo"'))
    return any(extra.get("demo") for extra in session.scalars(named))
