"""Component isolation (issue 28 point 5): each differing component swapped into the good
environment and out of the bad one names the one, or the pair, that moves the case."""

from collections.abc import Mapping

import pytest

from app.localization.isolate import environment_diff, isolate_components

from .oracles import LEVEL, Noisy

GOOD = {"torch": "2.5.0", "triton": "3.1.0", "cuda": "12.4", "numpy": "1.26", "sympy": "1.13"}
BAD = {"torch": "2.6.0", "triton": "3.2.0", "cuda": "12.6", "numpy": "1.26", "einops": "0.8"}


def slower_when(*changed: str) -> Noisy:
    """20% slower when every named component has its bad version."""

    def level(spec: object) -> float:
        assert isinstance(spec, Mapping)
        return LEVEL * 1.2 if all(spec.get(n) == BAD.get(n) for n in changed) else LEVEL

    return Noisy(level, seed=len(changed))


def test_the_diff_names_changed_added_and_removed_components() -> None:
    assert environment_diff(GOOD, BAD) == ["cuda", "einops", "sympy", "torch", "triton"]


def test_one_component_is_named() -> None:
    found = isolate_components(GOOD, BAD, slower_when("triton"), higher_is_better=False)
    assert found.state == "culprit_found"
    assert found.culprit == ("triton",)
    assert "triton alone moves" in found.reason
    brought = [p for p in found.probes if p.label == "good with triton from bad"]
    assert brought[0].outcome == "bad"
    assert brought[0].spec == {**GOOD, "triton": "3.2.0"}
    taken_back = [p for p in found.probes if p.label == "bad with triton from good"]
    assert taken_back[0].outcome == "good"
    assert found.probe_count == 5 + 1  # good + each of 5, then bad - triton


def test_a_pair_that_only_together_moves_it() -> None:
    found = isolate_components(GOOD, BAD, slower_when("torch", "cuda"), higher_is_better=False)
    assert found.state == "culprit_found"
    assert found.culprit == ("cuda", "torch")
    assert "only together" in found.reason
    singles = [p for p in found.probes if "+" not in p.label]
    assert {p.outcome for p in singles} == {"good"}


def test_a_removed_component_can_be_the_culprit() -> None:
    found = isolate_components(GOOD, BAD, slower_when("sympy"), higher_is_better=False)
    assert found.culprit == ("sympy",)
    taken_back = next(p for p in found.probes if p.label == "bad with sympy from good")
    assert taken_back.spec == {**BAD, "sympy": "1.13"}
    assert taken_back.outcome == "good"


def test_swaps_that_do_not_build_name_the_pair_that_must_move_together() -> None:
    oracle = slower_when("torch")

    def broken(spec: object) -> bool:
        # torch 2.6 needs triton 3.2 and torch 2.5 triton 3.1: swapping either alone fails.
        assert isinstance(spec, Mapping)
        return (spec["torch"], spec["triton"]) in {("2.6.0", "3.1.0"), ("2.5.0", "3.2.0")}

    oracle.broken = broken
    found = isolate_components(GOOD, BAD, oracle, higher_is_better=False)
    assert found.state == "culprit_found"
    assert found.culprit == ("torch", "triton")
    failed = {p.label for p in found.probes if p.outcome == "build_failed"}
    assert {"good with torch from bad", "good with triton from bad"} <= failed


def test_no_difference_is_not_reproduced() -> None:
    found = isolate_components(GOOD, BAD, Noisy(lambda spec: LEVEL), higher_is_better=False)
    assert found.state == "not_reproduced"
    assert found.probes == ()
    with pytest.raises(ValueError, match="the same"):
        isolate_components(GOOD, dict(GOOD), Noisy(lambda spec: LEVEL), higher_is_better=False)
