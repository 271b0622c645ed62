"""Component isolation: which changed component (or pair of them) moves the case.

From the last good and first bad environments (component name to version; None: absent),
each component that differs is swapped both ways: the good environment with that component
from the bad one (does it bring the slowdown?) and the bad environment with it from the good
one (does taking it back remove it?). A component is named when both agree: good plus it
is bad, and bad without it is good. When no component does so alone, each pair is swapped
the same two ways, and a pair is named when only together its two components move the case.

Two answers would contradict each other, and some swaps do not build (a torch that needs
the newer Triton); the answer is then inconclusive, with every probe to read, rather than
a guess. Probes: two per changed component, then up to two per pair (``MAX_PAIRS`` pairs).
"""

from collections.abc import Mapping, Sequence
from itertools import combinations

from app.localization.probing import Localization, Measure, OnProbe, Prober, start

STRATEGY = "component_isolation"
MAX_PAIRS = 28  # the pairs of 8 changed components
Environment = Mapping[str, str | None]


def environment_diff(good: Environment, bad: Environment) -> list[str]:
    """The components whose versions differ (present on one side only included), by name."""
    return sorted(name for name in {*good, *bad} if good.get(name) != bad.get(name))


def _key(environment: Environment) -> tuple[tuple[str, str | None], ...]:
    return tuple(sorted(environment.items()))


def _swap(into: Environment, source: Environment, names: tuple[str, ...]) -> dict[str, str | None]:
    swapped = dict(into)
    for name in names:
        swapped[name] = source.get(name)
    return swapped


def isolate_components(
    good: Environment,
    bad: Environment,
    measure: Measure[Environment],
    *,
    higher_is_better: bool | None,
    on_probe: OnProbe | None = None,
) -> Localization:
    """Name the component (or pair) of the environment diff that moves the case."""
    changed = environment_diff(good, bad)
    if not changed:
        raise ValueError("the two environments are the same")
    prober: Prober[Environment] = Prober(measure, _key, higher_is_better, on_probe=on_probe)
    started = start(prober, STRATEGY, good, bad)
    if isinstance(started, Localization):
        return started
    groups: Sequence[tuple[str, ...]] = [(name,) for name in changed]
    if len(changed) == 1:
        reason = f"{changed[0]} is the only component that differs"
        return prober.result(STRATEGY, "culprit_found", reason, started, changed)
    for size in (1, 2):
        if size == 2:
            groups = list(combinations(changed, 2))[:MAX_PAIRS]
        named = [group for group in groups if _moves(prober, good, bad, group)]
        if len(named) == 1:
            what = " and ".join(named[0])
            how = "alone moves" if size == 1 else "only together move"
            reason = f"{what} {how} the case: with good it is bad, taken back it is good"
            return prober.result(STRATEGY, "culprit_found", reason, started, named[0])
        if len(named) > 1:
            found = ", ".join("+".join(group) for group in named)
            return prober.result(
                STRATEGY, "inconclusive", f"more than one answer: {found}", started
            )
    unresolved = [
        p.label for p in prober.records if p.outcome in ("unknown", "build_failed", "halfway")
    ]
    reason = "no component or pair moves the case on its own"
    if unresolved:
        reason += f"; undecided probes: {', '.join(unresolved)}"
    return prober.result(STRATEGY, "inconclusive", reason, started)


def _moves(
    prober: Prober[Environment], good: Environment, bad: Environment, group: tuple[str, ...]
) -> bool:
    """Whether good with ``group`` from bad is bad, and bad with it from good is good."""
    what = "+".join(group)
    brought = prober.probe(f"good with {what} from bad", _swap(good, bad, group))
    if brought.outcome != "bad":
        return False
    taken_back = prober.probe(f"bad with {what} from good", _swap(bad, good, group))
    return taken_back.outcome == "good"
