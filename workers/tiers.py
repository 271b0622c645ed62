"""What each tier runs: the tier table, its measurements, and its cut into shards.

The tier names and their order belong to the vocabulary (``app.benchmarks.vocabulary.
SUITE_TIERS``), so that the API, the CLI's options and beat's schedules check a tier without
importing torch; this table says what each of those tiers runs, and needs torch for its cases.
``tests/workers/test_tiers.py`` keeps the two in step.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from workers.harness import Case, Mode, Plan, identity, scaled
from workers.workloads.models import MODELS
from workers.workloads.operators import COLLECTIVES, OPERATORS
from workers.workloads.real_models import REAL_MODELS

if TYPE_CHECKING:
    from app.suite_runs.service import ShardPlan

CONFIGS = ("eager", "default", "dynamic", "cudagraphs", "max_autotune")
# PyTorch's other dashboard configs (workers.compile_configs): in the daily, full and models
# tiers; the smoke tier keeps to CONFIGS (its 10 minutes on 2 cores: the C++ builds of
# cpp_wrapper and aot_inductor take minutes each there).
DASHBOARD_CONFIGS = (
    *CONFIGS,
    "max_autotune_no_cudagraphs",
    "cpp_wrapper",
    "freezing",
    "export",
    "aot_inductor",
)
PRECISIONS = ("fp32", "bf16", "amp", "int8")
DAILY_PRECISIONS = (*PRECISIONS, "int4")
FULL_PRECISIONS = (*DAILY_PRECISIONS, "fp16")
TRAINING_PRECISIONS = ("fp32", "amp", "bf16")


@dataclass(frozen=True)
class Group:
    """Cases measured under every one of these configs, precisions and modes."""

    cases: tuple[Case, ...]
    configs: tuple[str, ...]
    precisions: tuple[str, ...]
    modes: tuple[Mode, ...] = ("inference",)


@dataclass(frozen=True)
class Tier:
    """What a tier runs and how often it repeats each timing."""

    groups: tuple[Group, ...]
    plan: Plan


class Measurement(NamedTuple):
    """One measurement to make: a case under a config, a precision and a mode.

    The arguments of ``workers.harness.measure`` less the device and the plan, which are the
    same for a whole tier; ``identity(*measurement)`` is the result identity it reports under.
    """

    case: Case
    config: str
    precision: str
    mode: Mode


def _named(cases: tuple[Case, ...], *names: str) -> tuple[Case, ...]:
    return tuple(case for case in cases if case.model in names)


TRAINABLE = tuple(case for case in MODELS if case.training_reason is None)
# Larger tiers run the models at 8 times their smoke batch.
MODELS_X8 = tuple(scaled(case, 8) for case in MODELS)
TRAINABLE_X8 = tuple(scaled(case, 8) for case in TRAINABLE)
REAL = tuple(model.case() for model in REAL_MODELS)
TIERS = {
    # Every category once, eager fp32, one training step and a config that is skipped on a
    # CPU: the integration tests' tier.
    "test": Tier(
        (
            Group(OPERATORS + COLLECTIVES + MODELS, ("eager",), ("fp32",)),
            Group(_named(OPERATORS, "softmax"), ("cudagraphs",), ("fp32",)),
            Group(_named(MODELS, "resnet"), ("eager",), ("fp32",), ("training",)),
        ),
        Plan(repeats=3, warmup=1),
    ),
    # Operators and tiny shapes of every category under every config and precision, plus
    # AMP training of a CNN and a transformer: within 10 minutes on a 2-core CPU.
    "smoke": Tier(
        (
            Group(OPERATORS, CONFIGS, PRECISIONS),
            Group(COLLECTIVES, ("eager",), ("fp32",)),
            Group(MODELS, CONFIGS, PRECISIONS),
            Group(
                _named(MODELS, "resnet", "bert"),
                ("eager", "default"),
                ("fp32", "amp"),
                ("training",),
            ),
        ),
        Plan(repeats=10, warmup=2, max_repeats=30),
    ),
    "daily": Tier(
        (
            Group(OPERATORS, DASHBOARD_CONFIGS, DAILY_PRECISIONS),
            Group(COLLECTIVES, ("eager",), ("fp32",)),
            Group(MODELS_X8, DASHBOARD_CONFIGS, DAILY_PRECISIONS),
            Group(TRAINABLE_X8, ("eager", "default", "cudagraphs"), ("fp32", "amp"), ("training",)),
        ),
        Plan(repeats=50, warmup=5, max_repeats=150),
    ),
    "full": Tier(
        (
            Group(OPERATORS, DASHBOARD_CONFIGS, FULL_PRECISIONS),
            Group(COLLECTIVES, ("eager",), ("fp32",)),
            Group(MODELS_X8, DASHBOARD_CONFIGS, FULL_PRECISIONS),
            Group(TRAINABLE_X8, DASHBOARD_CONFIGS, TRAINING_PRECISIONS, ("training",)),
        ),
        Plan(repeats=100, warmup=10, max_repeats=300),
    ),
    # The real models (workers.workloads.real_models): PyTorch's dashboard names where the
    # model is the same, under the dashboard's configs; AMP training of a CNN and a
    # transformer.
    "models": Tier(
        (
            Group(REAL, DASHBOARD_CONFIGS, ("fp32", "bf16", "amp")),
            Group(
                _named(REAL, "mobilenet_v3_large", "BertForMaskedLM"),
                ("eager", "default"),
                ("fp32", "amp"),
                ("training",),
            ),
        ),
        Plan(repeats=10, warmup=2, max_repeats=30),
    ),
}


def tier_measurements(
    tier: Tier,
    *,
    only: str | None = None,
    configs: Iterable[str] | None = None,
    precisions: Iterable[str] | None = None,
) -> list[Measurement]:
    """Every case x config x precision x mode of a tier, filtered."""
    return [
        Measurement(case, config, precision, mode)
        for group in tier.groups
        for case in group.cases
        if only is None or only in case.model
        for mode in group.modes
        for config in (tuple(configs) if configs else group.configs)
        for precision in (tuple(precisions) if precisions else group.precisions)
    ]


def plan_shards(tier: str, models: list[str] | None = None) -> list["ShardPlan"]:
    """The shards of a tier (or of only these models), each with its result identities.

    A shard is one case in one mode under all of its tier's configs and precisions: the unit
    that a crash, a hang or an out-of-memory takes down, and that is retried.
    """
    # Here, not on top: a shard's child imports this module, and needs no database layer.
    from app.suite_runs.service import ShardPlan

    shards: dict[str, list[dict[str, Any]]] = {}
    for measurement in tier_measurements(TIERS[tier]):
        if models is None or measurement.case.model in models:
            label = f"{measurement.case.model} {measurement.mode}"
            shards.setdefault(label, []).append(identity(*measurement))
    return [ShardPlan(label, cases) for label, cases in shards.items()]


def measurements_of(tier: str, cases: list[dict[str, Any]]) -> list[Measurement]:
    """The measurements of a tier that these result identities name (``plan_shards`` undone)."""
    known = {(c.suite, c.model): c for group in TIERS[tier].groups for c in group.cases}
    return [
        Measurement(known[c["suite"], c["model"]], c["config"], c["precision"], c["mode"])
        for c in cases
    ]
