"""Canonical names, units and architecture short names."""

import pytest

from app.benchmarks import vocabulary as vocab


@pytest.mark.parametrize(
    ("alias", "canonical"),
    [
        ("inductor_no_cudagraphs", "default"),
        ("inductor_with_cudagraphs", "cudagraphs"),
        ("inductor", "cudagraphs"),
        ("inductor_dynamic", "dynamic"),
        ("inductor_cpp_wrapper", "cpp_wrapper"),
        ("inductor_aot_inductor", "aot_inductor"),
        ("inductor_with_cudagraphs_freezing", "cudagraphs_freezing"),
        ("inductor_max_autotune", "max_autotune"),
        ("inductor_export", "export"),
        ("inductor_eager", "eager"),
        ("my_custom", "my_custom"),
    ],
)
def test_pytorch_backend_names_map_to_dashboard_configs(alias: str, canonical: str) -> None:
    assert vocab.canonical_config(alias) == canonical


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("float32", "fp32"),
        ("bfloat16", "bf16"),
        ("AMP", "amp"),
        ("quant", "int8"),
        ("int4", "int4"),
        ("fp7", None),
    ],
)
def test_precisions(name: str, canonical: str | None) -> None:
    assert vocab.canonical_precision(name) == canonical


def test_units_convert_within_a_dimension_only() -> None:
    assert vocab.unit_factor("us", "ms") == pytest.approx(1e-3)
    assert vocab.unit_factor("GiB", "MiB") == pytest.approx(1024)
    assert vocab.unit_factor("ms", "GB") is None
    assert vocab.default_direction("tokens/s") is True
    assert vocab.default_direction("ms") is False
    assert vocab.default_direction("%") is None
    assert not vocab.allows_negative("ms")
    assert vocab.allows_negative("%")


@pytest.mark.parametrize(
    ("arch", "short"),
    [
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("AMD Instinct MI300X", "mi300x"),
        ("AMD Instinct MI325X", "mi325x"),
        ("NVIDIA A100-SXM4-80GB", "a100"),
        ("NVIDIA L4", "l4"),
        ("NVIDIA GeForce RTX 4090", "rtx4090"),
        ("Apple M2", "apple-m2"),
    ],
)
def test_short_arch(arch: str, short: str) -> None:
    assert vocab.short_arch(arch) == short
