"""The per-revision page: everything one commit or torch build moved, triaged once.

The groups ``anomalies.revisions`` gathers across machines, channels and projects, with their
counts, worst steps (and their newest localizations), each group's triage state, and the bulk
triage form of the alerts page over them.
"""

from typing import Any

from sqlalchemy.orm import Session

from app.anomalies import described, revisions
from app.anomalies.deadlines import Deadlines
from app.anomalies.models import STATUSES
from app.dashboard import localization_page


def revision_page(session: Session, revision: str, rules: Deadlines) -> dict[str, Any]:
    """The page's context for ``revision`` (a 422 page for an unusable one)."""
    report = revisions.revision_report(session, revision)
    groups = described.describe_groups(session, report.groups, rules)
    localized = localization_page.newest_of(session, {"regression": [r.id for r in report.worst]})
    worst = [
        {
            "id": r.id,
            "group_id": r.group_id,
            **r.series.benchmark.identity(),
            "machine": r.series.machine.name,
            "device": r.series.machine.device,
            "channel": r.series.channel,
            "metric": r.series.metric.name,
            "rel_change": r.rel_change,
            "status": r.status,
            "localization": localized.get(("regression", r.id)),
        }
        for r in report.worst
    ]
    machines = sorted({g["machine"] for g in groups})
    return {
        "report": report,
        "groups": groups,
        "worst": worst,
        "machines": machines,
        "channels": sorted({g["channel"] for g in groups}),
        "projects": sorted({g["project"] for g in groups}),
        "statuses": STATUSES,
        "breakdowns": revisions.BREAKDOWNS,
    }
