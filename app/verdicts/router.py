"""Verdicts: a run's results against the default branch at its fork point."""

from typing import Any

from fastapi import APIRouter, Request

from app.anomalies import registry
from app.api.deps import ReadAccess, SessionDep
from app.api.responses import READS, errors
from app.api.validation import ApiRoute
from app.core.bounds import RowId
from app.verdicts import service
from app.verdicts.schemas import Verdicts

router = APIRouter(tags=["runs"], dependencies=[ReadAccess], route_class=ApiRoute, responses=READS)


@router.get("/runs/{run_id}/verdicts", response_model=Verdicts, responses=errors(404, 413, 503))
def run_verdicts(run_id: RowId, session: SessionDep, request: Request) -> dict[str, Any]:
    """Each result of the run with a verdict against the default branch at its fork point.

    For a branch's run (a pull request's): `pass`, `regression`, `improvement`,
    `no_baseline` or `error` per result, against the default branch's series of the same
    benchmark, metric and machine, since its last accepted step, up to the fork point (the
    run of its `base_commit`, else the newest default-branch run before it). Regression and
    improvement need a change beyond the noise (a robust z >= 5, outside the baseline's
    range, and the samples' rank test where both sides have enough samples) and at least
    the series' minimum effect; a series with no
    noise (counts, memory) has an expected value with its metric kind's margin. A run of
    more than `MAX_RESULTS` results is refused (413): its verdicts would cost too much.
    """
    settings = request.app.state.settings
    thresholds = registry.read_thresholds(settings.DETECTOR_THRESHOLDS)
    return service.verdicts_of(session, run_id, thresholds, settings.PUBLIC_URL)
