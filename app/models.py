"""Every domain's models, imported so that ``Base.metadata`` is complete (Alembic, tests)."""

from app.benchmarks.models import Benchmark, CompilerConfig, Machine, Metric, Series
from app.core.db import Base
from app.runs.models import Environment, Result, Run
from app.tokens.models import ApiToken

__all__ = [
    "ApiToken",
    "Base",
    "Benchmark",
    "CompilerConfig",
    "Environment",
    "Machine",
    "Metric",
    "Result",
    "Run",
    "Series",
]
