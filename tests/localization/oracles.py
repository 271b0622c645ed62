"""Seeded oracles for the localization tests: levels with Gaussian noise, builds that fail."""

from collections.abc import Callable, Collection, Sequence

import numpy as np

from app.localization.probing import BuildFailed

LEVEL = 100.0


class Noisy:
    """Samples of ``level(spec)`` with a coefficient of variation ``cv``; records each call."""

    def __init__(
        self,
        level: Callable[[object], float],
        *,
        cv: float = 0.02,
        seed: int = 0,
        broken: Callable[[object], bool] = lambda spec: False,
    ) -> None:
        self.level, self.cv, self.broken = level, cv, broken
        self.rng = np.random.default_rng(seed)
        self.calls: list[tuple[object, int]] = []

    def __call__(self, spec: object, count: int) -> Sequence[float] | BuildFailed:
        self.calls.append((spec, count))
        if self.broken(spec):
            return BuildFailed("compile error")
        level = self.level(spec)
        return list(self.rng.normal(level, self.cv * level, count))


def commit_range(
    n: int, culprit: int, *, step: float = 0.10, cv: float = 0.02, seed: int = 0,
    broken: Collection[int] = (),
) -> tuple[list[str], Noisy]:  # fmt: skip
    """``n`` candidate commits after a good ``c0``; ``c{culprit}`` onwards is slower."""
    commits = [f"c{i}" for i in range(n + 1)]

    def level(spec: object) -> float:
        return LEVEL * (1 + step) if int(str(spec)[1:]) >= culprit else LEVEL

    return commits, Noisy(level, cv=cv, seed=seed, broken=lambda spec: int(str(spec)[1:]) in broken)
