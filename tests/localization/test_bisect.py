import math
from collections.abc import Sequence

import pytest

from app.localization.bisect import bisect_commits
from app.localization.probing import BuildFailed

from .oracles import commit_range


@pytest.mark.parametrize(
    ("n", "culprit", "seed"), [(64, 1, 1), (64, 37, 2), (64, 64, 3), (100, 58, 4), (512, 300, 5)]
)
def test_the_culprit_in_a_noisy_range_within_the_build_bound(
    n: int, culprit: int, seed: int
) -> None:
    commits, oracle = commit_range(n, culprit, step=0.10, cv=0.02, seed=seed)
    found = bisect_commits(commits, oracle, higher_is_better=False)
    assert found.state == "culprit_found"
    assert found.culprit == (f"c{culprit}",)
    assert not found.ambiguous
    assert found.builds <= math.ceil(math.log2(n)) + 2
    assert found.probe_count == found.builds - 2
    assert found.preflight is not None
    assert found.preflight.reproduced
    # Every probe left of the culprit judged good, every one at or right of it bad.
    for probe in found.probes:
        assert probe.outcome == ("bad" if int(probe.label[1:]) >= culprit else "good")
        assert probe.judgement is not None
        assert probe.judgement.p_good <= 1


def test_a_higher_is_better_metric_bisects_its_drop() -> None:
    commits, oracle = commit_range(32, 9, step=-0.2, seed=6)
    found = bisect_commits(commits, oracle, higher_is_better=True)
    assert found.culprit == ("c9",)
    assert bisect_commits(commits, oracle, higher_is_better=False).state == "not_reproduced"


def test_unbuildable_commits_are_skipped() -> None:
    # c16, the first middle, and c17, the next one tried, do not build.
    commits, oracle = commit_range(32, 20, seed=7, broken={16, 17})
    found = bisect_commits(commits, oracle, higher_is_better=False)
    assert found.culprit == ("c20",)
    failed = [p.label for p in found.probes if p.outcome == "build_failed"]
    assert failed[:2] == ["c16", "c17"]
    assert all(p.judgement is None for p in found.probes if p.outcome == "build_failed")
    assert found.builds <= math.ceil(math.log2(32)) + 2 + len(failed)


def test_a_range_of_unbuildable_commits_is_the_answer() -> None:
    commits, oracle = commit_range(32, 12, seed=8, broken={10, 11, 12})
    found = bisect_commits(commits, oracle, higher_is_better=False)
    assert found.state == "culprit_found"
    assert found.ambiguous
    # The good end is c9 and the bad end c13 (the culprit c12 does not build).
    assert found.culprit == ("c10", "c11", "c12", "c13")
    assert "do not build" in found.reason


def test_no_step_is_not_reproduced_with_the_figures() -> None:
    commits, oracle = commit_range(64, 10, step=0.0, seed=9)
    found = bisect_commits(commits, oracle, higher_is_better=False)
    assert found.state == "not_reproduced"
    assert found.culprit == ()
    assert found.probes == ()
    assert found.builds == 2
    assert found.repeats == 8  # both references grown to the cap
    assert found.reason.startswith("not reproduced: good ")
    assert "(160 samples)" in found.reason


def test_a_reference_that_does_not_build_fails() -> None:
    commits, oracle = commit_range(8, 3, seed=10, broken={8})
    found = bisect_commits(commits, oracle, higher_is_better=False)
    assert found.state == "failed"
    assert "bad reference" in found.reason


def test_a_probe_that_stays_unknown_is_inconclusive_not_a_guess() -> None:
    commits, oracle = commit_range(16, 5, seed=11)

    def measure(spec: str, count: int) -> Sequence[float] | BuildFailed:
        if spec == "c8":  # half far below good, half far above bad: ranks like both references
            return [70.0 + 70.0 * (i % 2) for i in range(count)]
        return oracle(spec, count)

    found = bisect_commits(commits, measure, higher_is_better=False)
    assert found.state == "inconclusive"
    assert found.culprit == ()
    assert found.remaining == tuple(f"c{i}" for i in range(1, 17))
    assert [p.label for p in found.probes] == ["c8"]
    assert found.probes[0].outcome == "unknown"
    assert len(found.probes[0].samples) == 160
    assert "cannot be told" in found.reason


def test_the_range_is_checked() -> None:
    _, oracle = commit_range(4, 2)
    with pytest.raises(ValueError, match="two distinct"):
        bisect_commits(["c0"], oracle, higher_is_better=False)
    with pytest.raises(ValueError, match="two distinct"):
        bisect_commits(["c0", "c1", "c0"], oracle, higher_is_better=False)
