"""An isolation forest (Liu, Ting & Zhou 2008) for the few dozen rows a run is scored against.

Each tree splits the rows at random, a random feature at a random value between its least and
greatest, down to rows alone or the height limit; a row that is isolated in few splits is
unusual. As scikit-learn's ``IsolationForest`` defines it, for rows fewer than 256 (each tree
takes them all):

- a tree's path length for a row is the depth of its leaf plus ``average_path_length`` of
  the rows that share the leaf (the depth an unbuilt subtree would have added);
- its score is ``-2 ** (-mean path length / average_path_length(rows))``, lower the more
  unusual, and the offset is the ``contamination`` quantile of the rows' scores: a row
  scoring below it is anomalous.

A feature that is constant among a node's rows is not drawn there (as scikit-learn's random
splitter skips it), and a node whose features are all constant is a leaf.

Every tree is built at once, level by level, over arrays of (tree, row): a tree of Python
nodes, or scikit-learn's estimators with their per-tree checks, cost more than the rest of a
run's detection, and every ingested run is scored.
"""

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

EULER_GAMMA = 0.5772156649015329


def average_path_length(rows: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """The mean depth of an unsuccessful search in a binary search tree of ``rows`` rows."""
    n = np.asarray(rows, dtype=np.float64)
    safe = np.maximum(n, 3.0)  # np.where evaluates both sides
    longer = 2.0 * (np.log(safe - 1.0) + EULER_GAMMA) - 2.0 * (safe - 1.0) / safe
    return np.where(n <= 1, 0.0, np.where(n == 2, 1.0, longer))


@dataclass(frozen=True)
class Isolation:
    """Each row's score (lower is more unusual) and the offset the anomalous fall below."""

    scores: npt.NDArray[np.float64]
    offset: float

    def decision(self, row: int) -> float:
        """The row's score less the offset: below zero, anomalous."""
        return float(self.scores[row] - self.offset)


def isolate(
    rows: npt.ArrayLike, trees: int = 50, contamination: float = 0.05, seed: int = 0
) -> Isolation:
    """The forest's scores of the rows it is grown on (2-D: a row per observation)."""
    data = np.asarray(rows, dtype=np.float64)
    count = len(data)
    if count < 2:
        raise ValueError("an isolation forest needs two rows or more")
    rng = np.random.default_rng(seed)
    height = math.ceil(math.log2(count))
    # node[t, i]: the node of tree t that row i is in (a heap's numbering: children 2k+1, 2k+2)
    node = np.zeros((trees, count), dtype=np.int64)
    depth = np.zeros((trees, count), dtype=np.float64)
    open_ = np.ones((trees, count), dtype=bool)  # the rows still being split
    for level in range(height + 1):
        t, i = np.nonzero(open_)
        if t.size == 0:
            break
        # One group per open node: its rows, their least and greatest values per feature.
        key = t * (1 << (height + 1)) + node[t, i]
        order = np.argsort(key, kind="stable")
        t, i, key = t[order], i[order], key[order]
        starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        sizes = np.diff(np.r_[starts, key.size])
        group = np.repeat(np.arange(starts.size), sizes)
        x = data[i]
        low = np.minimum.reduceat(x, starts, axis=0)
        high = np.maximum.reduceat(x, starts, axis=0)
        varied = high > low
        leaf = (sizes == 1) | ~varied.any(axis=1) | (level == height)
        # A leaf's rows are done: its depth plus the depth its rows would have added.
        done = leaf[group]
        depth[t[done], i[done]] = level + average_path_length(sizes)[group[done]]
        open_[t[done], i[done]] = False
        # The others split on a feature drawn among those that vary, at a value drawn between.
        draws = np.where(varied, rng.random(varied.shape), np.inf)
        feature = np.argmin(draws, axis=1)
        span = np.arange(starts.size)
        cut = low[span, feature] + rng.random(starts.size) * (
            high[span, feature] - low[span, feature]
        )
        moving = ~done
        right = x[moving, feature[group[moving]]] > cut[group[moving]]
        node[t[moving], i[moving]] = 2 * node[t[moving], i[moving]] + 1 + right
    mean_path = depth.mean(axis=0)
    scores = -(2.0 ** (-mean_path / float(average_path_length(count))))
    return Isolation(scores, float(np.percentile(scores, 100.0 * contamination)))
