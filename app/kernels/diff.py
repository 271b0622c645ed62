"""Two profiles of one case, kernel by kernel: what appeared, went, got slower, fused otherwise.

The step is the change in a call's wall time between the two profiles. Each kernel's change
is its share of it; the kernels past the stored list ("other kernels") and the time outside
any kernel (launch overhead, host time, graph breaks, the profiler's own) make up the rest,
so the parts sum to the step. A kernel got slower or faster when its time moved by more than
the comparison's threshold (``benchmarks.comparison``); else it is the same.

The kernels that moved the finding's way rank first: a regression's slower ones, an
improvement's faster ones. The way is the finding's, not the walls': a profiled call's wall on
the CPU is mostly the profiler's own time, so a preempted profile can move it against a kernel
that is five times slower. Where the walls moved against the finding, no part has a share and
there is no headline: no share of such a step tells where the finding is. Two runs compared
as such have no finding: their way is the walls'.

A fusion change is named when generated kernels that went and came account for the same ops:
one kernel's ops are exactly those of two or more new ones (a split), or the reverse (a fuse).
Ops are compared word by word (``identity.Identity.op_tokens``).
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from app.benchmarks.comparison import relative_change, threshold_for
from app.kernels.identity import Identity

Change = Literal["appeared", "disappeared", "slower", "faster", "same"]
Way = Literal["slower", "faster"]
FUSION_KINDS = ("fused", "template")
HEADLINE_SHARE = 0.2  # a part of the step a headline names


class Profile(Protocol):
    """What the diff reads of a profile (``models.KernelProfile`` is one)."""

    timing: str
    wall_us: float
    other_us: float
    graphs: int | None
    recompiles: int | None
    kernels: list[dict[str, Any]]


class ProfilesDiffer(ValueError):
    """The two profiles time different things (device kernels against CPU self time)."""


@dataclass(frozen=True)
class KernelChange:
    """One identity across the two profiles."""

    kind: str
    name: str
    change: Change
    base_us: float
    head_us: float
    delta_us: float
    relative: float | None  # head over base, minus one; None where either side lacks it
    share: float | None  # of the step; None when it is zero or moved against the finding
    base_calls: float
    head_calls: float
    names: list[str]


@dataclass(frozen=True)
class FusionChange:
    """Generated kernels that split or fused between the two profiles."""

    change: Literal["split", "fused"]
    before: list[str]  # identities, as str(Identity)
    after: list[str]
    delta_us: float
    share: float | None


@dataclass(frozen=True)
class KernelDiff:
    """Everything the two profiles say about the step between them."""

    timing: str
    base_wall_us: float
    head_wall_us: float
    step_us: float
    toward: Way  # the way the kernels are ranked: the finding's, or the walls'
    kernels: list[KernelChange]  # the largest move that way first
    other_delta_us: float
    outside_delta_us: float
    fusions: list[FusionChange]
    graphs: tuple[int | None, int | None]
    recompiles: tuple[int | None, int | None]
    headline: str  # one line for a notification ("" when no kernel carries the step)

    @property
    def against_the_walls(self) -> bool:
        """Whether the walls moved against the way the kernels rank (no part has a share)."""
        return bool(self.step_us) and _walls_way(self.step_us) != self.toward


def _walls_way(step_us: float) -> Way:
    return "faster" if step_us < 0 else "slower"


def diff(base: Profile, head: Profile, toward: Way | None = None) -> KernelDiff:
    """The kernel diff from ``base`` (last good) to ``head`` (first bad).

    ``toward``: the way the finding moved the case; None takes it from the walls.
    """
    if base.timing != head.timing:
        raise ProfilesDiffer(
            f"the profiles time different things: {base.timing} against {head.timing}"
        )
    step = head.wall_us - base.wall_us
    walls = _walls_way(step)
    way = toward or walls
    shared = step if way == walls else 0.0  # the step the parts are shares of
    before, after = _by_identity(base.kernels), _by_identity(head.kernels)
    changes = [
        _change(key, before.get(key), after.get(key), shared)
        for key in sorted(set(before) | set(after))
    ]
    sign = -1.0 if way == "faster" else 1.0
    changes.sort(key=lambda c: (-sign * c.delta_us, c.kind, c.name))
    other = head.other_us - base.other_us
    outside = step - sum(c.delta_us for c in changes) - other
    return KernelDiff(
        timing=head.timing,
        base_wall_us=base.wall_us,
        head_wall_us=head.wall_us,
        step_us=step,
        toward=way,
        kernels=changes,
        other_delta_us=other,
        outside_delta_us=outside,
        fusions=_fusions(changes, shared),
        graphs=(base.graphs, head.graphs),
        recompiles=(base.recompiles, head.recompiles),
        headline=_headline(changes, outside, shared),
    )


def _headline(changes: Sequence[KernelChange], outside_us: float, step_us: float) -> str:
    """Where most of the step is: "78% of the step is in `fused_softmax` (+130%)".

    The largest kernel's part, when it carries at least ``HEADLINE_SHARE`` of the step; the
    time outside kernels instead where it carries more. Nothing when no part stands out.
    """
    if not step_us:
        return ""
    top = changes[0] if changes else None
    share = (top.share or 0.0) if top is not None else 0.0
    outside = outside_us / step_us
    if outside >= max(share, HEADLINE_SHARE):
        return f"{outside:.0%} of the step is outside the kernels"
    if top is None or share < HEADLINE_SHARE:
        return ""
    name = str(Identity(top.kind, top.name))
    moved = {"appeared": "new", "disappeared": "gone"}.get(top.change)
    if moved is None:
        moved = f"{top.relative:+.0%}" if top.relative is not None else top.change
    return f"{share:.0%} of the step is in `{name}` ({moved})"


def _by_identity(kernels: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], Mapping[str, Any]]:
    return {(k["kind"], k["name"]): k for k in kernels}


def _change(
    key: tuple[str, str],
    base: Mapping[str, Any] | None,
    head: Mapping[str, Any] | None,
    step: float,
) -> KernelChange:
    base_us = float(base["time_us"]) if base else 0.0
    head_us = float(head["time_us"]) if head else 0.0
    relative = relative_change(head_us, base_us) if base and head else None
    change: Change
    if base is None:
        change = "appeared"
    elif head is None:
        change = "disappeared"
    elif relative is None:  # a zero base: any time now is a slowdown
        change = "slower" if head_us > 0 else "same"
    elif abs(relative) > threshold_for():
        change = "slower" if relative > 0 else "faster"
    else:
        change = "same"
    names = [*(head or {}).get("names", []), *(base or {}).get("names", [])]
    return KernelChange(
        kind=key[0],
        name=key[1],
        change=change,
        base_us=base_us,
        head_us=head_us,
        delta_us=head_us - base_us,
        relative=relative,
        share=(head_us - base_us) / step if step else None,
        base_calls=float(base["calls"]) if base else 0.0,
        head_calls=float(head["calls"]) if head else 0.0,
        names=list(dict.fromkeys(names)),
    )


def _fusions(changes: Sequence[KernelChange], step: float) -> list[FusionChange]:
    gone = [c for c in changes if c.change == "disappeared" and c.kind in FUSION_KINDS]
    new = [c for c in changes if c.change == "appeared" and c.kind in FUSION_KINDS]
    found = [_regrouped("split", one, new, step) for one in gone]
    found += [_regrouped("fused", one, gone, step) for one in new]
    return [f for f in found if f is not None]


def _regrouped(
    change: Literal["split", "fused"],
    one: KernelChange,
    others: Sequence[KernelChange],
    step: float,
) -> FusionChange | None:
    """``one`` against the ``others`` whose ops are all among its own, if they cover them."""
    ops = _ops(one)
    parts = [o for o in others if _ops(o) and _ops(o) <= ops]
    if len(parts) < 2 or frozenset().union(*(_ops(p) for p in parts)) != ops:
        return None
    names = [str(Identity(p.kind, p.name)) for p in parts]
    single = [str(Identity(one.kind, one.name))]
    delta = sum(p.delta_us for p in parts) + one.delta_us
    before, after = (single, names) if change == "split" else (names, single)
    return FusionChange(change, before, after, delta, delta / step if step else None)


def _ops(change: KernelChange) -> frozenset[str]:
    return Identity(change.kind, change.name).op_tokens
