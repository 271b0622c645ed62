"""``benchwatch demo``: a realistic, clearly labelled history to explore the dashboard with.

90 days of 12-hourly runs on two machines (``demo-h100``: CUDA, ``demo-mi300x``: ROCm) and
three release lines (``2.12`` = N-1, ``2.13`` = N, ``nightly`` = N+1): the built-in suite's
12 categories x 5 compiler configs x 3 precisions, with per-model noise and rare outliers, and
these injected events, so that detection has something to find:

- demo-h100 nightly, day 60: a triton bump slows the ``dynamic`` config of the transformer
  models by 18% and makes them recompile (a regression group);
- demo-mi300x nightly, day 45: the ``default`` config of the vision models gets 10% faster
  (an improvement);
- demo-h100 nightly, day 75: ``cudagraphs`` peak memory rises 30% (a memory regression);
- demo-h100 2.13, days 30-40: compile time rises 40%, then reverts;
- demo-mi300x nightly, from day 70: video3d fails accuracy under amp (a failing model);
- demo-h100 2.13, from day 80: gcn under amp and cudagraphs crashes every other run (a
  flaky case, told once as flaky);
- demo-mi300x 2.12 stops reporting on day 85 (a silent machine);
- from day 50: a new model, ``llama_tiny``, appears everywhere;
- demo-h100 2.12, from day 55: ``dlrm`` eager under fp32 gets three times noisier from run to
  run (a noise change: its level stays);
- demo-mi300x 2.13, from day 65: ``lstm`` under max_autotune and bf16 turns bimodal, a third
  of its runs picking a kernel 12% slower (the autotuner's second choice);
- both machines' nightly, from day 82: one torch nightly slows the ``default`` config of the
  convolutional models by 12% on CUDA and ROCm alike (a revision that moved several machines:
  its page is ``/revisions/<its torch git sha>``).

Detection then runs over the whole history, and the findings are dated as a live server would
have found them (two hours after their first bad run). A few were triaged as a team would:
the triton group acknowledged with a GitHub issue as its bug link (open), the ROCm speed-up
marked expected, the compile-time bump fixed; the rest are still new, most of them overdue.

Every machine and run says it is demo data (machine and environment ``extra.demo``).
"""

import math
import random
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from app.anomalies import service as anomalies_service
from app.anomalies import silence, triage
from app.anomalies.models import (
    AggregateFinding,
    AlertGroup,
    CaseFailure,
    MachineSilence,
    Regression,
    Triaged,
)
from app.anomalies.schemas import TriageUpdate
from app.benchmarks.models import Machine
from app.core.db import Database
from app.notifications import issue_sync
from app.notifications.models import IssueState
from app.runs.ingest import ingest_run
from app.runs.models import Run
from app.runs.schemas import RunIn

SUITE = "benchwatch-models"
MODELS = (
    ("resnet", "image_classification", 32),
    ("detector", "object_detection", 16),
    ("unet", "segmentation", 16),
    ("bert", "text_encoder", 32),
    ("gpt", "language_model", 32),
    ("gpt_generate", "language_model", 8),
    ("conformer", "speech", 16),
    ("dlrm", "recommendation", 256),
    ("gcn", "graph", 512),
    ("video3d", "video", 8),
    ("diffusion_unet", "diffusion", 8),
    ("vit", "vision_transformer", 32),
    ("lstm", "sequence", 32),
)
NEW_MODEL = ("llama_tiny", "language_model", 16)
NEW_MODEL_DAY = 50
CONFIGS = {"eager": 1.0, "default": 1.3, "dynamic": 1.2, "cudagraphs": 1.6, "max_autotune": 1.75}
PRECISIONS = {"fp32": 1.0, "amp": 0.6, "bf16": 0.55}
CHANNELS = {"2.12": 1.03, "2.13": 1.0, "nightly": 0.99}  # N-1, N, N+1: newer is a bit faster
TRANSFORMERS = {"bert", "gpt", "gpt_generate", "llama_tiny", "vit"}
VISION = {"resnet", "detector", "unet", "vit"}
DAYS = 90
REVISION_DAY = 82  # a torch nightly that moves both machines
CONVOLUTIONAL = {"resnet", "detector", "unet", "video3d"}
FOUND_AFTER = timedelta(hours=2)  # a finding is dated this long after its first bad run
# On a host of its own: the poll reads only the configured GitHub's issues, never a demo's.
DEMO_ISSUE = "https://github.example/pytorch/pytorch/issues/160001"


@dataclass(frozen=True)
class DemoMachine:
    """A demo machine: its description, speed relative to the H100 and stack versions."""

    name: str
    description: dict[str, Any]
    speed: float
    backend: str  # "cu128" or "rocm7.0"


MACHINES = (
    DemoMachine(
        "demo-h100",
        {
            "device": "cuda",
            "arch": "NVIDIA H100 80GB HBM3",
            "gpu_count": 8,
            "gpu_memory_gb": 80.0,
            "driver": "580.65.06",
            "extra": {"demo": True},
        },
        1.0,
        "cu128",
    ),
    DemoMachine(
        "demo-mi300x",
        {
            "device": "rocm",
            "arch": "AMD Instinct MI300X",
            "gpu_count": 8,
            "gpu_memory_gb": 192.0,
            "driver": "6.14.14",
            "extra": {"demo": True},
        },
        1.12,
        "rocm7.0",
    ),
)


@dataclass(frozen=True)
class Point:
    """Where a run sits: machine, channel, index (two per day) and time."""

    machine: DemoMachine
    channel: str
    index: int
    at: datetime

    @property
    def day(self) -> int:
        """Days since the start of the history."""
        return self.index // 2


def _stable(*parts: object) -> float:
    """A number in [0, 1) fixed by its parts (the same on every machine and run)."""
    return zlib.crc32("/".join(map(str, parts)).encode()) / 2**32


def _environment(point: Point) -> dict[str, Any]:
    date = (point.at - timedelta(days=1)).strftime("%Y%m%d")
    torch = {
        "2.12": "2.12.1",
        "2.13": "2.13.0",
        "nightly": f"2.14.0.dev{date}",
    }[point.channel]
    late = point.channel == "nightly" and point.day >= 60 and point.machine.name == "demo-h100"
    return {
        "channel": point.channel,
        "torch": f"{torch}+{point.machine.backend}",
        "torch_git_sha": f"{zlib.crc32(torch.encode()):08x}",
        "triton": "3.6.1" if late else "3.6.0" if point.channel == "nightly" else "3.5.1",
        "python": "3.12.11",
        "cuda": "12.8" if point.machine.backend == "cu128" else "",
        "hip": "7.0.1" if point.machine.backend != "cu128" else "",
        "driver": str(point.machine.description["driver"]),
        "packages": {"numpy": "2.3.4"},
        "extra": {"demo": True},
    }


def _effects(point: Point, model: str, config: str, precision: str) -> dict[str, float]:
    """Multipliers the injected events put on this case's metrics (``noise``: its sigma's)."""
    on = point.machine.name
    nightly = point.channel == "nightly"
    latency = memory = compile_time = 1.0
    if nightly and on == "demo-h100" and point.day >= 60 and config == "dynamic":
        latency *= 1.18 if model in TRANSFORMERS else 1.0
    if nightly and on == "demo-mi300x" and point.day >= 45 and config == "default":
        latency *= 0.90 if model in VISION else 1.0
    if nightly and on == "demo-h100" and point.day >= 75 and config == "cudagraphs":
        memory *= 1.30
    if point.channel == "2.13" and on == "demo-h100" and 30 <= point.day < 40:
        compile_time *= 1.40
    noise = 1.0
    case = (model, config, precision)
    if point.channel == "2.12" and on == "demo-h100" and point.day >= 55:
        noise = 3.0 if case == ("dlrm", "eager", "fp32") else 1.0
    if nightly and point.day >= REVISION_DAY and config == "default" and model in CONVOLUTIONAL:
        latency *= 1.12
    late = point.channel == "2.13" and on == "demo-mi300x" and point.day >= 65
    if late and case == ("lstm", "max_autotune", "bf16"):
        latency *= 1.12 if _stable(on, point.channel, point.index, "kernel") < 1 / 3 else 1.0
    return {"latency": latency, "memory": memory, "compile": compile_time, "noise": noise}


def _noise(rng: random.Random, sigma: float) -> float:
    outlier = 1.3 if rng.random() < 0.01 else 1.0
    return math.exp(rng.gauss(0.0, sigma)) * outlier


def _case_rows(
    point: Point, rng: random.Random, model: str, category: str, batch: int
) -> Iterator[dict[str, Any]]:
    sigma = 0.008 + 0.02 * _stable(model, "noise")
    eager_ms = 2 + 60 * _stable(model, "latency") * point.machine.speed
    memory_gb = 1 + 30 * _stable(model, "memory")
    for precision, precision_factor in PRECISIONS.items():
        eager = eager_ms * precision_factor * CHANNELS[point.channel]
        for config, speedup in CONFIGS.items():
            ident = {
                "suite": SUITE,
                "model": model,
                "category": category,
                "mode": "inference",
                "precision": precision,
                "config": config,
                "batch_size": batch,
            }
            yield from _metric_rows(point, rng, ident, eager, speedup, memory_gb, sigma)


def _metric_rows(
    point: Point,
    rng: random.Random,
    ident: dict[str, Any],
    eager: float,
    speedup: float,
    memory_gb: float,
    sigma: float,
) -> Iterator[dict[str, Any]]:
    model, config, precision = ident["model"], ident["config"], ident["precision"]
    effect = _effects(point, model, config, precision)
    jitter = 0.85 + 0.3 * _stable(model, config, precision)
    latency = eager / (1.0 if config == "eager" else speedup * jitter) * effect["latency"]
    if effect["noise"] != 1.0:  # the run as a whole scatters more, its samples alike
        latency *= math.exp(rng.gauss(0.0, sigma * math.sqrt(effect["noise"] ** 2 - 1)))
    samples = [round(latency * _noise(rng, sigma), 4) for _ in range(5)]
    median = sorted(samples)[2]
    peak = memory_gb * (1.0 if config == "eager" else 0.85) * effect["memory"]
    failing = point.machine.name == "demo-mi300x" and point.channel == "nightly"
    failing = failing and model == "video3d" and precision == "amp" and point.day >= 70
    if _flaky(point, model, config, precision):
        reason = "CUDA error: an illegal memory access was encountered"
        yield {**ident, "metric": "latency", "status": "failed", "reason": reason}
    else:
        yield {**ident, "metric": "latency", "value": median, "samples": samples}
    yield {**ident, "metric": "throughput", "value": ident["batch_size"] / (median / 1000)}
    yield {**ident, "metric": "peak_memory", "value": round(peak * _noise(rng, 0.003), 4)}
    yield {**ident, "metric": "accuracy", "text_value": "fail_accuracy" if failing else "pass"}
    if config == "eager":
        return
    compile_s = (20 + 70 * _stable(model, "compile")) * effect["compile"] * _noise(rng, 0.03)
    yield {**ident, "metric": "speedup", "value": round(eager / median, 4)}
    yield {**ident, "metric": "compilation_latency", "value": round(compile_s, 2)}
    yield {**ident, "metric": "compression_ratio", "value": round(memory_gb / peak, 4)}
    if config == "dynamic":
        late = point.machine.name == "demo-h100" and point.channel == "nightly"
        recompiles = 2.0 if late and point.day >= 60 and model in TRANSFORMERS else 0.0
        yield {**ident, "metric": "recompiles", "value": recompiles}


def _flaky(point: Point, model: str, config: str, precision: str) -> bool:
    """The flaky case: it crashes every other run from day 80."""
    case = (point.machine.name, point.channel, model, config, precision)
    flaky = case == ("demo-h100", "2.13", "gcn", "cudagraphs", "amp")
    return flaky and point.day >= 80 and point.index % 2 == 1


def run_payload(point: Point) -> RunIn:
    """One demo run, the same every time for the same point."""
    rng = random.Random(f"{point.machine.name}/{point.channel}/{point.index}")
    models = MODELS + ((NEW_MODEL,) if point.day >= NEW_MODEL_DAY else ())
    results = [row for m in models for row in _case_rows(point, rng, *m)]
    return RunIn.model_validate(
        {
            "key": f"demo-{point.machine.name}-{point.channel}-{point.index:03d}",
            "machine": {"name": point.machine.name, **point.machine.description},
            "environment": _environment(point),
            "trigger": "schedule",
            "tier": "daily",
            "commit": f"{zlib.crc32(f'{point.channel}{point.day}'.encode()):08x}",
            "branch": "main" if point.channel == "nightly" else f"release/{point.channel}",
            "started_at": point.at.isoformat(),
            "finished_at": (point.at + timedelta(hours=2)).isoformat(),
            "results": results,
        }
    )


SILENT = ("demo-mi300x", "2.12")  # stops reporting
SILENT_DAYS = 5  # before the end of the history


def points(days: int, now: datetime) -> list[Point]:
    """Every run of the history, oldest first, at 00:00 and 12:00 UTC.

    The newest is the last of these before ``now``, so that only the silent channel is silent.
    """
    slot = now.replace(hour=now.hour - now.hour % 12, minute=0, second=0, microsecond=0)
    start = slot - timedelta(hours=12 * (2 * days - 1))
    every = [
        Point(machine, channel, index, start + timedelta(hours=12 * index))
        for index in range(2 * days)
        for machine in MACHINES
        for channel in CHANNELS
    ]
    if days <= 2 * SILENT_DAYS:  # a short history keeps every machine reporting
        return every
    return [p for p in every if (p.machine.name, p.channel) != SILENT or p.day < days - SILENT_DAYS]


class _Discard:
    """Drops the per-run detection tasks: the demo rescans everything once at the end."""

    def publish(self, name: str, kwargs: dict[str, Any]) -> None:
        """Nothing to do."""


def load(
    database: Database,
    *,
    days: int = DAYS,
    now: datetime | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Load the history and run detection; returns the number of runs (0: already loaded)."""
    with database.session_scope() as session:
        if session.scalar(select(Run.id).where(Run.key.like("demo-%")).limit(1)) is not None:
            return 0
    database.set_publisher(_Discard())
    history = points(days, now or datetime.now(UTC))
    latest: dict[tuple[str, str], int] = {}
    for done, point in enumerate(history, start=1):
        with database.session_scope() as session:
            run = ingest_run(session, run_payload(point), source="demo").run
            latest[point.machine.name, point.channel] = run.id
        if progress is not None:
            progress(done, len(history))
    with database.session_scope() as session:
        anomalies_service.rescan(session)
        silence.open_silences(session)
    for run_id in latest.values():  # the newest runs get their anomaly score, as after upload
        with database.session_scope() as session:
            anomalies_service.detect_for_run(session, run_id)
    with database.session_scope() as session:
        as_found(session)
        triaged_as_a_team_would(session)
    return len(history)


FINDINGS = (Regression, CaseFailure, AggregateFinding, MachineSilence)


def as_found(session: Session) -> None:
    """Date each group and its findings as a live server would have: after its first bad run.

    The rescan found them all now; the quality page's weeks and the deadlines read these.
    """
    runs = {r.id: r.started_at for r in session.scalars(select(Run))}
    for group in session.scalars(select(AlertGroup)):
        found = runs.get(group.first_bad_run_id, group.created_at) + FOUND_AFTER
        group.created_at = found
        for model in FINDINGS:
            session.execute(
                update(model).where(model.group_id == group.id).values(created_at=found)
            )


def triaged_as_a_team_would(session: Session) -> None:
    """A few groups triaged, each some hours after it was found; one linked to a GitHub issue."""
    plans = (
        (
            "demo-h100",
            "nightly",
            "regression",
            60,
            {"status": "acknowledged", "assignee": "triton-oncall", "bug_url": DEMO_ISSUE},
            20,
        ),
        (
            "demo-mi300x",
            "nightly",
            "improvement",
            45,
            {"status": "expected", "note": "the new ROCm conv kernels"},
            30,
        ),
        (
            "demo-h100",
            "2.13",
            "regression",
            30,
            {"status": "fixed", "note": "compile cache regression, reverted"},
            72,
        ),
    )
    for machine, channel, direction, day, fields, hours in plans:
        group = _group_of(session, machine, channel, direction, day)
        if group is None:
            continue
        triage.triage(session, triage.GROUP, group.id, TriageUpdate(**fields), "demo: on-call")
        rows: list[Triaged] = [group, *group.regressions, *group.failures, *group.aggregates]
        for row in rows:
            row.triaged_at = group.created_at + timedelta(hours=hours)
    # As GitHub last told it: open (the demo is offline: no webhook comes, the poll is off).
    repository, number = issue_sync.parse(DEMO_ISSUE) or ("", 0)
    session.add(IssueState(url=DEMO_ISSUE, repository=repository, number=number, state="open"))


def _group_of(
    session: Session, machine: str, channel: str, direction: str, day: int
) -> AlertGroup | None:
    """The group of that machine and channel with a step that way, found nearest to ``day``."""
    start = session.scalar(select(func.min(Run.started_at)))
    if start is None:
        return None
    query = (
        select(AlertGroup)
        .join(Machine, AlertGroup.machine_id == Machine.id)
        .where(Machine.name == machine)
        # a release line's runs carry their branch: "2.13@release-2.13-..."
        .where((AlertGroup.channel == channel) | AlertGroup.channel.startswith(f"{channel}@"))
        .where(AlertGroup.regressions.any(Regression.direction == direction))
    )
    wanted = start + timedelta(days=day)
    found = list(session.scalars(query))
    return min(found, key=lambda g: abs(g.created_at - wanted), default=None)
