"""The tier table (workers.tiers) and the tier vocabulary (app.benchmarks.vocabulary) agree."""

from app.benchmarks import vocabulary
from workers.tiers import TIERS, tier_measurements


def test_the_table_has_the_vocabularys_tiers_in_its_order() -> None:
    assert tuple(TIERS) == vocabulary.SUITE_TIERS


def test_tiers_grow_in_the_vocabularys_order() -> None:
    """The vocabulary lists the tiers smallest first: each runs more, and repeats more."""
    sizes = [len(tier_measurements(TIERS[name])) for name in vocabulary.SUITE_TIERS]
    repeats = [TIERS[name].plan.repeats for name in vocabulary.SUITE_TIERS]
    assert sizes == sorted(sizes)
    assert repeats == sorted(repeats)


def test_the_table_names_only_canonical_configs_and_precisions() -> None:
    for name, tier in TIERS.items():
        for group in tier.groups:
            assert set(group.configs) <= set(vocabulary.COMPILER_CONFIGS), name
            assert set(group.precisions) <= set(vocabulary.PRECISIONS), name
