"""Compiler-setting bisection (issue 28 point 5): ddmin of the settings that differ names the one,
or the pair, that causes the slowdown, 1-minimal, within its probe bound."""

import math
from collections.abc import Mapping

from app.localization.ddmin import bisect_settings, differing_settings

from .oracles import LEVEL, Noisy

NAMES = [f"setting_{i:02d}" for i in range(16)]
GOOD: dict[str, object] = dict.fromkeys(NAMES, False) | {"max_autotune": False}
BAD: dict[str, object] = dict.fromkeys(NAMES, True) | {"max_autotune": False, "new_flag": 3}


def slower_when(**bad_values: object) -> Noisy:
    def level(spec: object) -> float:
        assert isinstance(spec, Mapping)
        hit = all(spec.get(name) == value for name, value in bad_values.items())
        return LEVEL * 1.15 if hit else LEVEL

    return Noisy(level, seed=len(bad_values))


def test_the_differing_settings() -> None:
    assert differing_settings(GOOD, BAD) == sorted([*NAMES, "new_flag"])


def test_a_single_setting() -> None:
    found = bisect_settings(GOOD, BAD, slower_when(setting_11=True), higher_is_better=False)
    assert found.state == "culprit_found"
    assert found.culprit == ("setting_11",)
    assert "setting_11 False -> True" in found.reason
    assert found.probe_count <= 2 * math.ceil(math.log2(17))
    assert found.notes == ()


def test_a_setting_only_the_bad_side_sets() -> None:
    found = bisect_settings(GOOD, BAD, slower_when(new_flag=3), higher_is_better=False)
    assert found.culprit == ("new_flag",)
    assert "new_flag None -> 3" in found.reason


def test_a_pair_of_settings() -> None:
    oracle = slower_when(setting_02=True, setting_13=True)
    found = bisect_settings(GOOD, BAD, oracle, higher_is_better=False)
    assert found.state == "culprit_found"
    assert found.culprit == ("setting_02", "setting_13")
    # 1-minimal: each of the two alone was judged and is not bad.
    alone = {p.label: p.outcome for p in found.probes}
    assert alone["good with setting_02 from bad"] == "good"
    assert alone["good with setting_13 from bad"] == "good"


def test_no_slowdown_is_not_reproduced() -> None:
    found = bisect_settings(GOOD, BAD, Noisy(lambda spec: LEVEL), higher_is_better=False)
    assert found.state == "not_reproduced"
    assert found.culprit == ()
