"""Compiler-setting bisection: the minimal set of differing settings that causes the slowdown.

The good and bad runs' settings (name to value; None: left at its default) differ in some
names. A probe is the good settings with a subset of those differences taken from the bad
side; it *fails* when it is judged bad. Zeller and Hildebrandt's ddmin ("Simplifying and
isolating failure-inducing input", 2002) then shrinks the full difference, which fails by
the pre-flight: split it in ``n`` parts; a part that fails becomes the set (``n = 2``); else a
complement that fails does (``n - 1``); else split finer (``2n``), until the parts are
single settings. The answer is 1-minimal: taking any one setting out of it, it no longer
fails. An undecided probe (unknown, half-way, not built) counts as not failing, as ddmin's
unresolved outcome does; the answer is still a set that fails, and the notes say how many
probes were undecided, since the set may then not be the smallest.

Probes: ``log2`` of the differences for one culprit setting, at most ``n^2 + 3n`` in general.
"""

from collections.abc import Callable, Mapping, Sequence

from app.localization.probing import Localization, Measure, OnProbe, Prober, start

STRATEGY = "setting_bisection"
Settings = Mapping[str, object]


def differing_settings(good: Settings, bad: Settings) -> list[str]:
    """The settings whose values differ between the two sides (one side's only included)."""
    return sorted(name for name in {*good, *bad} if good.get(name) != bad.get(name))


def _key(settings: Settings) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((name, repr(value)) for name, value in settings.items()))


def bisect_settings(
    good: Settings,
    bad: Settings,
    measure: Measure[Settings],
    *,
    higher_is_better: bool | None,
    on_probe: OnProbe | None = None,
) -> Localization:
    """Delta-debug the differing settings down to the minimal set that makes good bad."""
    changed = differing_settings(good, bad)
    if not changed:
        raise ValueError("the two sides' settings are the same")
    prober: Prober[Settings] = Prober(measure, _key, higher_is_better, on_probe=on_probe)
    started = start(prober, STRATEGY, good, bad)
    if isinstance(started, Localization):
        return started

    def fails(subset: Sequence[str]) -> bool:
        settings = {**good, **{name: bad.get(name) for name in subset}}
        record = prober.probe("good with " + ", ".join(subset) + " from bad", settings)
        return record.outcome == "bad"

    culprit = _ddmin(changed, fails)
    undecided = [p.label for p in prober.records if p.outcome not in ("good", "bad")]
    notes = (
        [f"{len(undecided)} probes undecided: the set may not be the smallest"] if undecided else []
    )
    values = ", ".join(f"{name} {good.get(name)!r} -> {bad.get(name)!r}" for name in culprit)
    reason = f"the slowdown follows {values}"
    return prober.result(STRATEGY, "culprit_found", reason, started, culprit, notes=notes)


def _ddmin(changed: list[str], fails: Callable[[Sequence[str]], bool]) -> list[str]:
    """Zeller's ddmin over ``changed`` (which fails), with ``fails`` testing a subset."""
    current, parts = list(changed), 2
    while len(current) >= 2:
        chunks = _split(current, parts)
        failing = next((chunk for chunk in chunks if fails(chunk)), None)
        if failing is not None:
            current, parts = failing, 2
            continue
        if parts > 2:
            complements = [[n for n in current if n not in chunk] for chunk in chunks]
            failing = next((c for c in complements if fails(c)), None)
            if failing is not None:
                current, parts = failing, max(parts - 1, 2)
                continue
        if parts >= len(current):
            break
        parts = min(2 * parts, len(current))
    return current


def _split(items: list[str], parts: int) -> list[list[str]]:
    size, extra = divmod(len(items), parts)
    chunks, start_at = [], 0
    for i in range(parts):
        stop = start_at + size + (1 if i < extra else 0)
        chunks.append(items[start_at:stop])
        start_at = stop
    return [chunk for chunk in chunks if chunk]
