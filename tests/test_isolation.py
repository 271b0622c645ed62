"""The isolation forest scores rows as scikit-learn's IsolationForest does, in a few ms."""

import numpy as np
import pytest
from sklearn.ensemble import IsolationForest

from app.core.isolation import average_path_length, isolate


@pytest.mark.parametrize(("count", "clustered"), [(12, 0), (51, 30)])
def test_each_rows_score_is_scikit_learns(count: int, clustered: int) -> None:
    # Heavy tails, a constant feature, and a row far out: a run's features look so. With a
    # thousand trees the two forests' randomness averages out, and what is left is the
    # algorithm: depths, the leaves' unbuilt subtrees, the normalisation. Rows bunched
    # together reach the height limit (two levels more moved their scores by 0.047).
    noise = np.random.default_rng(count)
    rows = noise.standard_t(3, size=(count, 4))
    rows[:clustered] = noise.normal(scale=1e-3, size=(clustered, 4))
    rows[:, 3] = 0.0
    rows[-1, :3] += 6.0
    forest = IsolationForest(n_estimators=1000, contamination=0.05, random_state=0)
    reference = forest.fit(rows)
    found = isolate(rows, trees=1000, contamination=0.05)
    assert np.max(np.abs(found.scores - reference.score_samples(rows))) < 0.03
    assert found.offset == pytest.approx(reference.offset_, abs=0.03)
    assert found.decision(count - 1) < 0  # the row far out is anomalous to both
    assert reference.predict(rows[-1:])[0] == -1


def test_the_contamination_is_the_share_of_rows_below_the_offset() -> None:
    rows = np.random.default_rng(7).normal(size=(51, 4))
    found = isolate(rows, contamination=0.05)
    # The 5th percentile of 51 scores lies between the third and the fourth lowest.
    assert int(np.sum(found.scores < found.offset)) == 3
    assert found.decision(int(np.argmin(found.scores))) < 0
    assert found.decision(int(np.argmax(found.scores))) > 0


def test_rows_that_cannot_be_split_are_each_a_leaf_of_every_tree() -> None:
    # No feature varies: the root is a leaf of 20 rows, and every path is c(20) of c(20).
    found = isolate(np.ones((20, 3)))
    assert found.scores.tolist() == pytest.approx([-0.5] * 20)
    assert found.offset == pytest.approx(-0.5)


def test_the_average_path_length_of_a_few_rows() -> None:
    assert average_path_length([0, 1, 2]).tolist() == [0.0, 0.0, 1.0]
    # 2 H(n - 1) - 2 (n - 1) / n, with H(i) = ln i + Euler's constant
    assert average_path_length(256).item() == pytest.approx(10.2447, abs=1e-4)


def test_the_same_rows_score_the_same_and_one_row_is_refused() -> None:
    rows = np.random.default_rng(1).normal(size=(30, 2))
    assert isolate(rows).scores.tolist() == isolate(rows).scores.tolist()
    with pytest.raises(ValueError, match="two rows"):
        isolate([[1.0, 2.0]])
