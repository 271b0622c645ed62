"""The JSON API: every domain's router mounted under /api/v1.

It lives at the top, beside ``create_app``: the routers import ``app.api``'s plumbing (deps,
validation, responses), so the module that imports every router cannot sit beside it.
"""

from fastapi import APIRouter, Depends

from app.annotations.router import reads as annotations_reads
from app.annotations.router import writes as annotations_writes
from app.anomalies.router import reads as anomalies_reads
from app.anomalies.router import writes as anomalies_writes
from app.api.responses import errors
from app.api.validation import refuse_nul_in_query
from app.audit.router import router as audit_router
from app.benchmarks.router import router as benchmarks_router
from app.corrections.router import router as corrections_router
from app.kernels.router import reads as kernels_reads
from app.localization.router import reads as localization_reads
from app.localization.router import writes as localization_writes
from app.notifications.router import deliveries as deliveries_router
from app.notifications.router import github_hooks, silence_reads, silence_writes
from app.notifications.router import router as notifications_router
from app.quality.router import router as quality_router
from app.runs.router import reads as runs_reads
from app.runs.router import router as runs_router
from app.suite_runs.router import router as suites_router
from app.summaries.router import router as summaries_router
from app.uploads.router import router as uploads_router
from app.verdicts.router import router as verdicts_router

api_router = APIRouter(
    prefix="/api/v1", dependencies=[Depends(refuse_nul_in_query)], responses=errors(422)
)
for router in (
    runs_router,
    uploads_router,
    runs_reads,
    kernels_reads,
    verdicts_router,
    benchmarks_router,
    summaries_router,
    quality_router,
    anomalies_reads,
    anomalies_writes,
    suites_router,
    notifications_router,
    deliveries_router,
    github_hooks,
    silence_reads,
    silence_writes,
    annotations_reads,
    annotations_writes,
    corrections_router,
    localization_reads,
    localization_writes,
    audit_router,
):
    api_router.include_router(router)
