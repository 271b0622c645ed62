"""The kernel diff: each kernel's part of the step, the rest outside, fusion changes named."""

from dataclasses import dataclass, field
from typing import Any

import pytest

from app.kernels.diff import ProfilesDiffer, diff
from app.kernels.identity import identity_of
from app.kernels.service import KernelTime, merged


@dataclass
class Side:
    """A profile as the diff reads it."""

    wall_us: float
    kernels: list[dict[str, Any]]
    timing: str = "device"
    other_us: float = 0.0
    graphs: int | None = 1
    recompiles: int | None = 0
    names: list[str] = field(default_factory=list)


def side(wall_us: float, other_us: float = 0.0, **times: float) -> Side:
    """A profile whose kernels are named as Inductor names them, one call each."""
    kernels = merged([KernelTime(name, 1.0, us) for name, us in times.items()])
    return Side(wall_us, [k.as_json() for k in kernels], other_us=other_us)


def test_the_parts_sum_to_the_step_and_the_biggest_comes_first() -> None:
    base = side(100.0, other_us=5.0, triton_poi_fused_add_0=20.0, triton_red_fused_sum_1=50.0)
    head = side(130.0, other_us=6.0, triton_poi_fused_add_3=21.0, triton_red_fused_sum_7=70.0)
    found = diff(base, head)
    assert found.step_us == pytest.approx(30.0)
    kernel_parts = sum(k.delta_us for k in found.kernels)
    assert kernel_parts + found.other_delta_us + found.outside_delta_us == pytest.approx(30.0)
    top, second = found.kernels
    assert (top.kind, top.name, top.change) == ("fused", "sum", "slower")  # renumbered, matched
    assert top.share == pytest.approx(20 / 30)
    assert (second.name, second.change) == ("add", "same")  # +5% is within the threshold
    assert found.other_delta_us == pytest.approx(1.0)
    assert found.outside_delta_us == pytest.approx(30 - 20 - 1 - 1)
    assert found.headline == "67% of the step is in `fused_sum` (+40%)"


def test_a_kernel_that_split_in_two_is_named_with_its_share() -> None:
    base = side(100.0, triton_poi_fused_add_mul_relu_0=40.0, triton_red_fused_sum_1=40.0)
    head = side(
        150.0,
        triton_poi_fused_add_mul_0=45.0,
        triton_poi_fused_relu_1=35.0,
        triton_red_fused_sum_2=40.0,
    )
    found = diff(base, head)
    changes = {k.name: k.change for k in found.kernels}
    assert changes == {
        "add_mul_relu": "disappeared",
        "add_mul": "appeared",
        "relu": "appeared",
        "sum": "same",
    }
    (split,) = found.fusions
    assert split.change == "split"
    assert split.before == ["fused_add_mul_relu"]
    assert sorted(split.after) == ["fused_add_mul", "fused_relu"]
    assert split.delta_us == pytest.approx(40.0)
    assert split.share == pytest.approx(40 / 50)
    # The other way round, the two fused into one.
    (fused,) = diff(head, base).fusions
    assert (fused.change, fused.after) == ("fused", ["fused_add_mul_relu"])


def test_kernels_that_only_share_ops_are_no_fusion_change() -> None:
    base = side(100.0, triton_poi_fused_add_mul_0=40.0)
    head = side(100.0, triton_poi_fused_add_1=20.0, triton_poi_fused_sub_2=20.0)
    assert diff(base, head).fusions == []


def test_a_step_outside_the_kernels_is_said_to_be_there() -> None:
    base = side(100.0, triton_poi_fused_add_0=50.0)
    head = side(160.0, triton_poi_fused_add_0=50.0)
    found = diff(base, head)
    assert found.outside_delta_us == pytest.approx(60.0)
    assert found.headline == "100% of the step is outside the kernels"


def test_no_headline_when_no_part_stands_out() -> None:
    base = side(100.0, **{f"triton_poi_fused_op{i}_{i}": 5.0 for i in range(10)})
    head = side(110.0, **{f"triton_poi_fused_op{i}_{i}": 6.0 for i in range(10)})
    found = diff(base, head)
    assert [k.share for k in found.kernels] == [pytest.approx(0.1)] * 10
    assert found.headline == ""


def test_device_and_cpu_profiles_are_not_compared() -> None:
    cpu = side(100.0, cpp_fused_add_0=50.0)
    cpu.timing = "cpu_self"
    with pytest.raises(ProfilesDiffer, match="device against cpu_self"):
        diff(side(100.0, triton_poi_fused_add_0=50.0), cpu)


def test_one_identity_merges_its_instances() -> None:
    (kernel,) = merged(
        [
            KernelTime("triton_poi_fused_add_0", 1.0, 10.0, "0/0"),
            KernelTime("triton_poi_fused_add_4", 2.0, 5.0, "1/0"),
        ]
    )
    assert (kernel.kind, kernel.name, kernel.instances) == ("fused", "add", 2)
    assert (kernel.calls, kernel.time_us, kernel.graphs) == (3.0, 15.0, ["0/0", "1/0"])
    assert identity_of("triton_poi_fused_add_4") == identity_of("cpp_fused_add_9")


def test_a_kernel_from_nothing_is_slower() -> None:
    found = diff(side(100.0, aten_zero=0.0), side(110.0, aten_zero=8.0))
    (kernel,) = found.kernels
    assert (kernel.change, kernel.relative, kernel.share) == ("slower", None, 0.8)


def test_the_findings_way_ranks_the_kernels_whatever_way_the_walls_moved() -> None:
    base = side(100.0, triton_red_fused_softmax_0=30.0, triton_poi_fused_add_1=20.0)
    head = side(90.0, triton_red_fused_softmax_0=60.0, triton_poi_fused_add_1=5.0)
    # No finding: the walls say faster, so the kernel that got faster comes first.
    by_walls = diff(base, head)
    assert by_walls.toward == "faster"
    assert [k.name for k in by_walls.kernels] == ["add", "softmax"]
    assert by_walls.kernels[0].share == pytest.approx(15 / 10)
    # A regression: the slower softmax comes first; the walls moved against it, so no part
    # has a share of their step and there is no headline.
    slower = diff(base, head, toward="slower")
    assert slower.toward == "slower"
    assert [(k.name, k.change) for k in slower.kernels] == [
        ("softmax", "slower"),
        ("add", "faster"),
    ]
    assert [k.share for k in slower.kernels] == [None, None]
    assert slower.headline == ""
    assert slower.step_us == pytest.approx(-10.0)  # the walls' step is kept as measured
    # An improvement the walls agree with reads as the walls do.
    assert diff(base, head, toward="faster") == by_walls
