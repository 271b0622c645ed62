"""Commit bisection: the first bad commit of a range, skipping those that do not build.

``commits`` runs from the last good commit to the first bad one (both measured by the
pre-flight); the culprit is one of the others or the last. Each step probes the middle
commit of the range still open and keeps the half the judgement points to: ``good`` moves
the good end up, ``bad`` (and ``halfway``: the case has begun to move, so a first move is at
or before it) moves the bad end down. With no unbuildable commit that is ``ceil(log2 n)``
probes for ``n`` candidate commits, ``ceil(log2 n) + 2`` builds with the references.

A commit that does not build is skipped, as ``git bisect skip`` does: the next commit
nearest the middle is probed instead. When every commit left between the ends failed to
build, the answer is that range (the first bad is one of them or the bad end), as git's
"the first bad commit could be any of". A probe still unknown after its repeats ends the
bisection as inconclusive, with the commits the culprit is still among: a guess from a
probe that cannot be told from either level would be a wrong answer as often as not.
"""

from collections.abc import Iterator, Sequence

from app.localization.probing import Localization, Measure, OnProbe, Prober, start

STRATEGY = "commit_bisection"


def bisect_commits(
    commits: Sequence[str],
    measure: Measure[str],
    *,
    higher_is_better: bool | None,
    on_probe: OnProbe | None = None,
) -> Localization:
    """Bisect ``commits`` (last good first, first bad last) with the oracle ``measure``."""
    if len(commits) < 2 or len(set(commits)) != len(commits):
        raise ValueError("a range is at least two distinct commits, the good one first")
    prober: Prober[str] = Prober(measure, str, higher_is_better, on_probe=on_probe)
    started = start(prober, STRATEGY, commits[0], commits[-1])
    if isinstance(started, Localization):
        return started
    good, bad = 0, len(commits) - 1
    skipped: set[int] = set()
    notes: list[str] = []
    while bad - good > 1:
        index = next((i for i in _from_middle(good, bad) if i not in skipped), None)
        if index is None:
            culprit = commits[good + 1 : bad + 1]
            reason = (
                f"commits {culprit[0]}..{culprit[-2]} do not build; "
                f"the first bad is one of them or {culprit[-1]}"
            )
            return prober.result(
                STRATEGY, "culprit_found", reason, started, culprit, ambiguous=True, notes=notes
            )
        record = prober.probe(commits[index], commits[index])
        if record.outcome == "build_failed":
            skipped.add(index)
        elif record.outcome == "good":
            good = index
        elif record.outcome in ("bad", "halfway"):
            if record.outcome == "halfway":
                notes.append(f"{commits[index]} is half-way: the step may have more than one cause")
            bad = index
        else:
            remaining = commits[good + 1 : bad + 1]
            reason = (
                f"{commits[index]} cannot be told from either level ({record.reason}); "
                f"the culprit is among {len(remaining)} commits"
            )
            return prober.result(
                STRATEGY, "inconclusive", reason, started, remaining=remaining, notes=notes
            )
    reason = f"{commits[bad]} is the first bad commit; {commits[good]} before it is good"
    return prober.result(STRATEGY, "culprit_found", reason, started, [commits[bad]], notes=notes)


def _from_middle(good: int, bad: int) -> Iterator[int]:
    """The commits strictly between the ends, the middle first, then outwards."""
    middle = (good + bad) // 2
    for distance in range(bad - good):
        for index in (middle + distance, middle - distance) if distance else (middle,):
            if good < index < bad:
                yield index
