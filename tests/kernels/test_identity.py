"""A kernel's identity: the same across builds' numbering and backends, bounded for any name."""

import pytest

from app.kernels.identity import IDENTITY_LIMIT, Identity, identity_of


@pytest.mark.parametrize(
    ("raw", "kind", "name"),
    [
        ("triton_poi_fused_add_mul_3", "fused", "add_mul"),
        ("cpp_fused_add_mul_7", "fused", "add_mul"),
        ("graph_12_cpp_fused_add_mul_0", "fused", "add_mul"),
        ("triton_red_fused__softmax_1", "fused", "softmax"),
        ("triton_per_fused_native_layer_norm_12", "fused", "native_layer_norm"),
        ("triton_tem_fused_addmm_relu_0", "template", "addmm_relu"),
        ("triton_poi_fused_0", "fused", "(unnamed)"),
        ("aten::addmm", "aten", "aten::addmm"),
        ("ampere_sgemm_128x64_nn", "kernel", "ampere_sgemm_128x64_nn"),
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>,"
            " at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, "
            "at::detail::Array<char*, 3>)",
            "kernel",
            "at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
            "at::detail::Array<char*, 3> >",
        ),
        (
            "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<"
            "at::native::copy_kernel(at::TensorIteratorBase&)::{lambda(int)#1}> >(int, float)",
            "kernel",
            "at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<"
            "at::native::copy_kernel(at::TensorIteratorBase&)::{lambda(int)#1}> >",
        ),
    ],
)
def test_identity_of_a_kernel(raw: str, kind: str, name: str) -> None:
    assert identity_of(raw) == Identity(kind, name)


def test_aten_functors_stay_apart() -> None:
    kernel = "void at::native::vectorized_elementwise_kernel<4, at::native::{}<float> >(int)"
    assert identity_of(kernel.format("CUDAFunctor_add")) != identity_of(kernel.format("MulFunctor"))


def test_fused_ops_compare_word_by_word() -> None:
    assert identity_of("triton_per_fused_native_layer_norm_2").op_tokens == {
        "native",
        "layer",
        "norm",
    }
    assert identity_of("aten::mm").op_tokens == frozenset()
    assert identity_of("triton_poi_fused_3").op_tokens == frozenset()


@pytest.mark.parametrize("raw", ["<" * 100_000, "a(" * 50_000, "x" * 100_000, "void " + ">" * 9])
def test_crafted_names_are_cut_to_the_limit(raw: str) -> None:
    assert len(identity_of(raw).name) <= IDENTITY_LIMIT
