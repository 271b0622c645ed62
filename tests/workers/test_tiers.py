"""The tier table (workers.tiers) and the tier vocabulary (app.benchmarks.vocabulary) agree."""

from app.benchmarks import vocabulary
from workers.compile_configs import EXPORTED, GPU_ONLY, INFERENCE_ONLY
from workers.tiers import TIERS, tier_measurements
from workers.workloads.models import MODELS
from workers.workloads.real_models import REAL_MODELS

BUILT_IN = ("test", "smoke", "daily", "full")  # the hand-written suite's tiers


def test_the_table_has_the_vocabularys_tiers_in_its_order() -> None:
    assert tuple(TIERS) == vocabulary.SUITE_TIERS
    assert (*BUILT_IN, "models") == vocabulary.SUITE_TIERS


def test_tiers_grow_in_the_vocabularys_order() -> None:
    """The built-in suite's tiers come smallest first: each runs more, and repeats more."""
    sizes = [len(tier_measurements(TIERS[name])) for name in BUILT_IN]
    repeats = [TIERS[name].plan.repeats for name in BUILT_IN]
    assert sizes == sorted(sizes)
    assert repeats == sorted(repeats)


def test_the_table_names_only_canonical_configs_and_precisions() -> None:
    for name, tier in TIERS.items():
        for group in tier.groups:
            assert set(group.configs) <= set(vocabulary.COMPILER_CONFIGS), name
            assert set(group.precisions) <= set(vocabulary.PRECISIONS), name


def test_the_harness_knows_every_config_the_vocabulary_names_for_it() -> None:
    """Each config that skips or exports is a dashboard config the tiers can name."""
    for config in (*GPU_ONLY, *INFERENCE_ONLY, *EXPORTED):
        assert config in vocabulary.COMPILER_CONFIGS, config


def test_the_models_tier_runs_the_real_models_and_the_test_tier_the_tiny_ones() -> None:
    models = {m.case.model for m in tier_measurements(TIERS["models"])}
    assert models == {model.model for model in REAL_MODELS}
    tiny = {m.case.model for m in tier_measurements(TIERS["test"])}
    assert tiny >= {case.model for case in MODELS}
    assert not tiny & models
