"""Every domain's models, imported so that ``Base.metadata`` is complete (Alembic, tests)."""

from app.annotations.models import Annotation
from app.anomalies.models import AlertGroup, CaseFailure, MachineSilence, Regression, RunAnomaly
from app.audit.models import AuditEntry
from app.benchmarks.models import (
    Benchmark,
    CatalogGeneration,
    CompilerConfig,
    Machine,
    Metric,
    Series,
)
from app.core.db import Base
from app.kernels.models import KernelCode, KernelProfile
from app.localization.models import Localization, LocalizationProbe
from app.notifications.models import Delivery, DeliveryAttempt, Notice, Silence, Subscription
from app.runs.models import Environment, InvalidatedResult, Result, Run
from app.suite_runs.models import SuiteRun, SuiteShard
from app.tokens.models import ApiToken

__all__ = [
    "AlertGroup",
    "Annotation",
    "ApiToken",
    "AuditEntry",
    "Base",
    "Benchmark",
    "CaseFailure",
    "CatalogGeneration",
    "CompilerConfig",
    "Delivery",
    "DeliveryAttempt",
    "Environment",
    "InvalidatedResult",
    "KernelCode",
    "KernelProfile",
    "Localization",
    "LocalizationProbe",
    "Machine",
    "MachineSilence",
    "Metric",
    "Notice",
    "Regression",
    "Result",
    "Run",
    "RunAnomaly",
    "Series",
    "Silence",
    "Subscription",
    "SuiteRun",
    "SuiteShard",
]
