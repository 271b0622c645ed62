"""Alert quality: findings per week, time to triage and fix, invalid shares, outcomes."""

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from app.anomalies.deadlines import Deadlines
from app.api.deps import ReadAccess, SessionDep
from app.api.responses import READS
from app.api.validation import ApiRoute
from app.quality import service

router = APIRouter(
    tags=["anomalies"], dependencies=[ReadAccess], route_class=ApiRoute, responses=READS
)


@router.get("/alert-quality")
def alert_quality(
    request: Request,
    session: SessionDep,
    weeks: Annotated[int, Query(ge=1, le=service.MAX_WEEKS, description="weeks back")] = 12,
) -> dict[str, Any]:
    """The figures a team manages sheriffing by, over the last `weeks` weeks (Monday to Sunday).

    `per_week`: findings found per week by kind; `time_to_triage` and `time_to_fix`: median
    and p90 hours over the findings people triaged; `invalid_share`: labels and the share
    marked invalid per suite, config and detector; `localizations`: those started, by state;
    `overdue`: groups past a triage deadline now.
    """
    return service.quality(session, weeks, Deadlines.of(request.app.state.settings))
