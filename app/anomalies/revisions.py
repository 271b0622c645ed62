"""Everything one change moved: the alert groups whose first bad run carries a revision.

A revision is a commit, a torch build (``2.7.0.dev20260113``) or a torch git sha; a sha of 7
hex digits or more also matches the shas it begins. One Inductor commit moves hundreds of
series on several GPUs, channels and projects: this gathers them so that they are triaged
once. Counts (by device, suite, config and precision) and the worst cases are over the steps
that hurt and the failing cases of those groups.

What one read may cost is bounded: at most ``MAX_GROUPS`` groups (the newest), their steps
counted in SQL, ``WORST`` cases listed.
"""

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import ColumnElement, func, or_, select
from sqlalchemy.orm import Session, lazyload

from app.anomalies.models import AlertGroup, CaseFailure, Regression
from app.benchmarks.models import Benchmark, CompilerConfig, Machine, Series
from app.core.errors import InvalidInput
from app.runs.models import Environment, Run

MAX_GROUPS = 500
WORST = 20
MAX_LENGTH = 128  # the longest a torch build is stored
SHA_PREFIX = re.compile(r"^[0-9a-f]{7,64}$")
BREAKDOWNS = ("device", "suite", "config", "precision")


@dataclass
class RevisionReport:
    """What a revision moved (``revision_report``)."""

    revision: str
    groups: list[AlertGroup] = field(default_factory=list)
    matched: dict[str, int] = field(default_factory=dict)  # groups per way the run matched
    counts: dict[str, dict[str, int]] = field(default_factory=dict)  # per breakdown, value
    worst: list[Regression] = field(default_factory=list)
    failures: int = 0
    truncated: bool = False


def check_revision(revision: str) -> str:
    """The revision, stripped; a 422 at ``path.revision`` for an empty or overlong one."""
    cleaned = revision.strip()
    if not cleaned or len(cleaned) > MAX_LENGTH or "\x00" in cleaned:
        raise InvalidInput(
            f"a revision is a commit, torch build or sha of 1 to {MAX_LENGTH} characters",
            errors=[{"loc": "path.revision", "field": "revision", "message": "invalid"}],
        )
    return cleaned


def _carries(revision: str) -> ColumnElement[bool]:
    """A run (joined with its environment) whose commit, torch build or torch sha is it."""
    exact = [Run.commit == revision, Environment.torch == revision]
    exact.append(Environment.torch_git_sha == revision)
    if SHA_PREFIX.match(revision.lower()):
        exact.append(Run.commit.startswith(revision.lower(), autoescape=True))
        exact.append(Environment.torch_git_sha.startswith(revision.lower(), autoescape=True))
    return or_(*exact)


def revision_report(session: Session, revision: str) -> RevisionReport:
    """The groups whose first bad run carries ``revision``, newest first, with what they span."""
    revision = check_revision(revision)
    query = (
        select(AlertGroup, Run.commit, Environment.torch, Environment.torch_git_sha)
        .join(Run, AlertGroup.first_bad_run_id == Run.id)
        .join(Environment, Run.environment_id == Environment.id)
        .where(_carries(revision))
        .options(lazyload(AlertGroup.regressions))
        .order_by(AlertGroup.id.desc())
        .limit(MAX_GROUPS + 1)
    )
    found = list(session.execute(query))
    report = RevisionReport(revision, truncated=len(found) > MAX_GROUPS)
    matched: Counter[str] = Counter()
    for group, commit, torch, sha in found[:MAX_GROUPS]:
        report.groups.append(group)
        matched[_how(revision, commit, torch, sha)] += 1
    report.matched = dict(matched)
    ids = [g.id for g in report.groups]
    if ids:
        report.counts = _counts(session, ids)
        report.worst = _worst(session, ids)
        report.failures = sum(1 for g in report.groups for f in g.failures if f.severity == "high")
    return report


def _how(revision: str, commit: str, torch: str, sha: str) -> str:
    """How a group's first bad run carries the revision: ``commit``, ``torch`` or ``torch_sha``."""
    lowered = revision.lower()
    if commit == revision or (SHA_PREFIX.match(lowered) and commit.startswith(lowered)):
        return "commit"
    if torch == revision:
        return "torch"
    return "torch_sha"


def _hurting(ids: list[int]) -> ColumnElement[bool]:
    return Regression.group_id.in_(ids) & (Regression.direction == "regression")


def _counts(session: Session, ids: list[int]) -> dict[str, dict[str, int]]:
    """Steps that hurt and failing cases, per device, suite, config and precision."""
    columns = {
        "device": Machine.device,
        "suite": Benchmark.suite,
        "config": CompilerConfig.name,
        "precision": Benchmark.precision,
    }
    counts: dict[str, dict[str, int]] = {name: {} for name in BREAKDOWNS}
    for name, column in columns.items():
        steps = (
            select(column, func.count())
            .select_from(Regression)
            .join(Series, Regression.series_id == Series.id)
            .join(Benchmark, Series.benchmark_id == Benchmark.id)
            .join(CompilerConfig, Benchmark.compiler_config_id == CompilerConfig.id)
            .join(Machine, Series.machine_id == Machine.id)
            .where(_hurting(ids))
            .group_by(column)
        )
        failing = (
            select(column, func.count())
            .select_from(CaseFailure)
            .join(Benchmark, CaseFailure.benchmark_id == Benchmark.id)
            .join(CompilerConfig, Benchmark.compiler_config_id == CompilerConfig.id)
            .join(Machine, CaseFailure.machine_id == Machine.id)
            .where(CaseFailure.group_id.in_(ids), CaseFailure.failure.not_in(CaseFailure.COVERAGE))
            .group_by(column)
        )
        tally: Counter[str] = Counter()
        for query in (steps, failing):
            for value, count in session.execute(query):
                tally[str(value)] += count
        counts[name] = dict(tally.most_common())
    return counts


def _worst(session: Session, ids: list[int]) -> list[Regression]:
    """The largest steps that hurt, ``WORST`` of them."""
    query = (
        select(Regression)
        .where(_hurting(ids))
        .order_by(func.abs(Regression.rel_change).desc(), Regression.id)
        .limit(WORST)
    )
    return list(session.scalars(query))


def describe(report: RevisionReport) -> dict[str, Any]:
    """The report's figures for the API (the groups are described by the caller)."""
    return {
        "revision": report.revision,
        "matched": report.matched,
        "counts": report.counts,
        "failures": report.failures,
        "truncated": report.truncated,
    }
