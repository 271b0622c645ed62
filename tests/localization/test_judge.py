import numpy as np
import pytest

from app.localization.judge import SCHEDULE, judge_probe, reproduces
from app.localization.probing import Prober

from .oracles import Noisy

rng = np.random.default_rng(28)
GOOD = list(rng.normal(100, 1, 20))
BAD = list(rng.normal(110, 1, 20))


@pytest.mark.parametrize(
    ("level", "decision"),
    [(100, "good"), (96, "good"), (110, "bad"), (125, "bad"), (105, "halfway")],
)
def test_each_decision_by_the_test_and_the_place_on_the_step(level: float, decision: str) -> None:
    probe = list(np.random.default_rng(1).normal(level, 1, 20))
    found = judge_probe(probe, GOOD, BAD)
    assert found.decision == decision
    assert found.probe.count == 20
    assert found.good.median == pytest.approx(np.median(GOOD))
    assert found.effect == pytest.approx(
        (found.probe.median - found.good.median) / found.good.median
    )
    assert found.position == pytest.approx((level - 100) / 10, abs=0.1)
    assert decision in found.reason
    assert f"{found.p_good:.2g}" in found.reason


def test_a_probe_like_both_references_is_unknown() -> None:
    # Half the samples far below good, half far above bad: the ranks match both references.
    probe = [80.0, 140.0] * 10
    found = judge_probe(probe, GOOD, BAD)
    assert found.decision == "unknown"
    assert found.p_good > 0.001
    assert found.p_bad > 0.001


def test_one_test_alone_is_not_a_side() -> None:
    # Unlike good by the test, but nearer good than bad: neither bad nor good.
    probe = list(np.random.default_rng(2).normal(101, 0.2, 20))
    found = judge_probe(probe, GOOD, list(np.random.default_rng(3).normal(103, 1, 20)))
    assert found.p_good <= 0.001
    assert found.decision != "bad"


def test_reproduced_only_the_worse_way_and_beyond_the_noise() -> None:
    assert reproduces(GOOD, BAD, higher_is_better=False).reproduced
    better = reproduces(GOOD, BAD, higher_is_better=True)
    assert not better.reproduced
    assert "better" in better.reason
    assert reproduces(GOOD, BAD, higher_is_better=None).reproduced
    # A real change by the test (0.4% on 0.1% noise), under the minimum effect (0.5%).
    quiet = list(np.random.default_rng(7).normal(100, 0.1, 40))
    tiny = reproduces(quiet, [x * 1.004 for x in quiet], higher_is_better=False)
    assert tiny.p_value <= 0.001
    assert not tiny.reproduced
    assert tiny.least == pytest.approx(0.005)
    assert tiny.reason.startswith("not reproduced: good 99.96 (40 samples), bad 100.4")
    assert "+0.4%" in tiny.reason
    assert "least 0.5%" in tiny.reason
    noise = reproduces(GOOD, list(rng.normal(100, 1, 20)), higher_is_better=False)
    assert not noise.reproduced
    assert noise.p_value > 0.001


def test_an_unknown_probe_is_repeated_along_the_schedule_up_to_the_cap() -> None:
    oracle = Noisy(lambda spec: 100.0, cv=0.01, seed=4)
    prober: Prober[str] = Prober(oracle, str, higher_is_better=False)
    prober.preflight("good", "bad")  # the same level: the references cannot tell
    record = prober.probe("p", "p")
    assert record.outcome == "unknown"
    asked = [count for spec, count in oracle.calls if spec == "p"]
    assert asked == [10, 10, 20, 40, 80]  # 10 -> 20 -> 40 -> 80 -> 160 in all
    assert len(record.samples) == SCHEDULE[-1]
    assert record.rounds == len(SCHEDULE)
    # The references grew with it: never fewer samples than the probe.
    assert sum(count for spec, count in oracle.calls if spec == "good") == SCHEDULE[-1]
    found = prober.result("test", "inconclusive", "", None)
    assert found.repeats == 3 * (len(SCHEDULE) - 1)
    assert found.builds == 3
    assert found.samples == 3 * SCHEDULE[-1]
    # Judged again: the record, no more measurement.
    assert prober.probe("p again", "p") is record
    assert len(oracle.calls) == 3 * len(SCHEDULE)


def test_a_probe_decided_after_repeats_stops_there() -> None:
    # A 4% step under 3% noise: 10 samples cannot tell, more do.
    oracle = Noisy(lambda spec: 100.0 if spec == "good" else 104.0, cv=0.03, seed=6)
    prober: Prober[str] = Prober(oracle, str, higher_is_better=False)
    assert prober.preflight("good", "bad").reproduced
    record = prober.probe("p", "p")
    assert record.outcome == "bad"
    assert 1 < record.rounds < len(SCHEDULE)


def test_a_smaller_cap_leaves_unknown_sooner() -> None:
    oracle = Noisy(lambda spec: 100.0, seed=6)
    prober: Prober[str] = Prober(oracle, str, higher_is_better=False, schedule=(5, 10))
    prober.preflight("good", "bad")
    assert prober.probe("p", "p").rounds == 2
    with pytest.raises(ValueError, match="rising"):
        Prober(oracle, str, higher_is_better=False, schedule=(10, 5))


def test_a_halfway_made_by_a_change_of_load_is_judged_again_side_by_side() -> None:
    # A neighbour slows the slow kernel by half while the references are measured, then
    # leaves: the probe, as slow as the bad reference, sits at 0.6 of the step it was given.
    load = {"neighbour": 1.5}

    def level(spec: object) -> float:
        return 100.0 if spec == "good" else 400.0 * load["neighbour"]

    oracle = Noisy(level, cv=0.01, seed=3)
    prober: Prober[str] = Prober(oracle, str, higher_is_better=False)
    assert prober.preflight("good", "bad").reproduced
    load["neighbour"] = 1.0
    record = prober.probe("p", "p")
    assert record.outcome == "bad", record.reason
    assert record.reason.startswith("side by side again, bad: at 1.00 of the step")
    assert "; first halfway: at 0.60 of the step" in record.reason
    # One more round of each, in turn: the probe, then both references.
    assert oracle.calls[2:] == [("p", 10), ("p", 10), ("good", 10), ("bad", 10)]
    assert record.rounds == 2
    assert len(record.samples) == 20
    assert record.judgement is not None
    assert record.judgement.probe.count == 10  # judged on the fresh round alone


def test_a_probe_halfway_beside_the_references_too_stays_halfway() -> None:
    oracle = Noisy(lambda spec: {"good": 100.0, "bad": 200.0}.get(str(spec), 150.0), seed=5)
    prober: Prober[str] = Prober(oracle, str, higher_is_better=False)
    prober.preflight("good", "bad")
    record = prober.probe("p", "p")
    assert record.outcome == "halfway", record.reason
    assert record.reason.startswith("side by side again, halfway: at 0.4")
    assert "; first halfway: at 0.5" in record.reason
    assert [count for spec, count in oracle.calls if spec == "p"] == [10, 10]
