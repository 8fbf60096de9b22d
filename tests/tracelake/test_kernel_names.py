"""Kernel names as people read them: namespaces trimmed, parameters dropped, templates folded (names from the
shipped A100 and MI250 traces)."""

from __future__ import annotations

import pytest

from transforms.report.names import short_kernel_name


@pytest.mark.parametrize(("name", "short"), [
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
     "ncclKernel_AllReduce_RING_LL_Sum_float"),
    ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4>"
     "(cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4::Params)",
     "Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4>"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, float, float, "
     "at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 2> >(int, "
     "at::native::AUnaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, "
     "at::detail::Array<char*, 2>)", "vectorized_elementwise_kernel<AUnaryFunctor, …>"),
    ("void at::native::(anonymous namespace)::max_pool_backward_nchw<float, float>(float const*, long const*, int)",
     "max_pool_backward_nchw<…>"),
    ("ampere_sgemm_32x32_sliced1x4_tn", "ampere_sgemm_32x32_sliced1x4_tn"),
])
def test_short_names(name: str, short: str) -> None:
    assert short_kernel_name(name) == short


def test_a_long_name_is_cut_to_the_limit() -> None:
    assert len(short_kernel_name("sm80_xmma_fprop_implicit_gemm_" + "x" * 100)) == 64
