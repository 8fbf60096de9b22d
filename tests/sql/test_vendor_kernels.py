"""Kernels per vendor (issue 36), on hand-written traces of the patterns real traces showed. Kernel names are those
of real traces: TraceLens' test data (AMD-AGI/TraceLens, MIT licence; tests/traces/mi300/*.json.gz: AMD MI300X
inference and resnet_act_checkpoint, an 8-rank DDP run; tests/traces/b200/eager_trace.json.gz: a vLLM run on an
NVIDIA B200; tests/traces/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz).

- Tensor/matrix cores: AMD MFMA GEMMs (Tensile/hipBLASLt ``Cijk_…_MI16x16x1``, composable-kernel xdlops, MIOpen
  ``igemm_…_gtcx3…_bf16``) and Blackwell cuBLASLt ``nvjet_*`` and FP8/FP4 block-scaled ``bmm_MxE4m3_MxE2m1…`` GEMMs
  use them; "tensor cores unused, enable torch.autocast" is wrong advice on such runs, and on any run whose GEMMs
  are BF16 already, whatever its kernels are named.
- Communication: on the MI300X DDP trace the RCCL kernels (``ncclDevKernel_Generic``) are launched by
  record_param_comms and carry no External id, so tb_plugin's rule (a kernel sharing a nccl:* op's External id)
  counted 6-9 ms of them per step as computation in comm_overlap_by_step.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from diag_fixtures import CPU_PID, CPU_TID, launch, step, write_trace
from gpu_marts_helpers import build_lake, read_mart

MI300X = {"name": "AMD Instinct MI300X", "computeMajor": 9, "computeMinor": 4, "numSms": 304}
B200 = {"name": "NVIDIA B200", "computeMajor": 10, "computeMinor": 0, "numSms": 148}
H100 = {"name": "NVIDIA H100 80GB HBM3", "computeMajor": 9, "computeMinor": 0, "numSms": 132}

# name -> uses tensor/matrix cores
MI300X_KERNELS = {
    "Cijk_Alik_Bljk_B_BS_BH_Bias_HA_S_SAV_UserArgs_MT128x224x64_MI16x16x1_SN_LDSB1_AFC1_AFEM1_AFEM1_ASEM1_CLR1_CADS0":
        True,
    "Cijk_Ailk_Bljk_BBS_BH_MT32x32x64_MI16x16x16x1_SN_1LDSB0_APM1_ABV0_ACED0_AF0EM1_AF1EM1_AMAS0_ASE_ASGT_ASLT": True,
    "_ZN2ck16tensor_operation6device37kernel_batched_gemm_xdlops_bwd_weightINS_47GridwiseGemm_bk0mk1_bk0nk1_mn_xdlops":
        True,
    "igemm_fwd_gtcx3_nhwc_bf16_bx0_ex1_bt128x128x32_wt32x32x8_ws1x1_wr2x2_ta1x8x2x1_1x4x1x64_tb1x8x2x1_1x4x1x64": True,
    "SubTensorOpWithCastTensor1d": False,  # MIOpen's tensor op (an elementwise kernel), not a tensor core
    "batched_transpose_32x32_half": False,
}
B200_KERNELS = {
    "nvjet_tst_64x64_64x16_2x1_2cta_v_bz_bias_TNT": True,
    "bmm_MxE4m3_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3_et128x16_m128x16x32_cga1x1x1_16dp256b_rM_TN_transOut_schedP2x1x2x3"
    "_biasM_bN_tma_tmaOpt_clmp_swiGlu_dynBatch_sm100f": True,
    "bmm_Bfloat16_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3_et128x16_m128x16x32_cga1x1x1_16dp256b_rM_TN_transOut"
    "_schedP2x1x2x3_biasM_bN_tmaOpt_clmp_dynBatch_sm100f": True,
    "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_32x1_nn_align8>"
    "(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_32x1_nn_align8::Params)": True,
}
FP32_SIMT_GEMM = "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>(cutlass_80_simt_sgemm_128x32_8x5_nn_align1::Params)"
RCCL_KERNEL = "ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)"
# name -> communication (kernel_type COMMUNICATION); the custom all-reduce kernels are HTA's COMPUTATION
COMMUNICATION_KERNELS = {
    RCCL_KERNEL: True,
    "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)": True,  # NCCL before 2.19 (param's 2023 DLRM job)
    "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*, unsigned long, "
    "unsigned int**, unsigned long, unsigned long)": True,  # torch symmetric memory (the B200 trace)
    "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals, vllm::Signal*, "
    "__nv_bfloat16*, int, int)": True,  # vLLM/SGLang custom all-reduce
    "triton_poi_fused_all_gather_copy_in_0": False,  # FSDP2's copy into the all-gather buffer, fused by Inductor
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, "
    "float>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, "
    "unsigned int, float, 4>)": False,
}
COMPUTE_KERNEL = next(iter(MI300X_KERNELS))


def _op(name: str, ts_us: float, dur_us: float, external_id: int, dtype: str | None = None) -> dict:
    args: dict = {"External id": external_id}
    if dtype is not None:
        args |= {"Input Dims": [[512, 1024], [1024, 1024]], "Input type": [dtype, dtype]}
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": CPU_PID, "tid": CPU_TID, "ts": ts_us, "dur": dur_us,
            "args": args}


def _kernel(name: str, ts_us: float, dur_us: float, correlation: int, stream: int = 7,
            external_id: int | None = None) -> dict:
    """A kernel; ROCm writes no External id on kernels (``external_id`` None)."""
    args: dict = {"device": 0, "stream": stream, "correlation": correlation}
    if external_id is not None:
        args["External id"] = external_id
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts_us, "dur": dur_us,
            "args": args}


def _launched(op: str, kernel_name: str, n: int, dtype: str | None, launch_name: str = "cudaLaunchKernel") -> list[dict]:
    """Op n (external id n) at n·100 µs launching one 40 µs kernel (correlation n)."""
    ts = n * 100.0
    return [_op(op, ts, 10, n, dtype), launch(ts + 2, 5, n, launch_name), _kernel(kernel_name, ts + 20, 40, n, external_id=n)]


def _write(folder: Path, device: dict, kernels: list[tuple[str, str, str | None]], launch_name: str) -> None:
    events = [step(1, 0, 100.0 * (len(kernels) + 2))]
    for n, (op, kernel_name, dtype) in enumerate(kernels, start=1):
        events += _launched(op, kernel_name, n, dtype, launch_name)
    path = write_trace(folder, 0, 1, events)
    import json

    trace = json.loads(path.read_text())
    trace["deviceProperties"] = [{"id": 0, "totalGlobalMem": 80 * 1024**3, **device}]
    path.write_text(json.dumps(trace, indent=1))


def _ddp_step_events() -> list[dict]:
    """One step of the MI300X DDP pattern, µs: a BF16 GEMM kernel [10, 40] launched by aten::mm, then the
    gradient all-reduce: a nccl:all_reduce annotation [44, 48] holding record_param_comms, whose RCCL kernel runs
    [50, 80] on the communication stream; kernels without External id, as ROCm writes them."""
    return [
        step(1, 0, 100),
        _op("aten::mm", 1, 5, 1, "c10::BFloat16"),
        launch(2, 2, 1, "hipLaunchKernel"),
        _kernel(COMPUTE_KERNEL, 10, 30, 1),
        {"ph": "X", "cat": "user_annotation", "name": "nccl:all_reduce", "pid": CPU_PID, "tid": CPU_TID, "ts": 44,
         "dur": 4, "args": {"External id": 2}},
        _op("record_param_comms", 44.5, 3, 3),
        launch(45, 2, 3, "hipExtLaunchKernel"),
        _kernel(RCCL_KERNEL, 50, 30, 3, stream=4),
    ]


@pytest.fixture(scope="module")
def vendor_lake(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, list[dict]]]:
    """Marts of the runs below, by mart and run."""
    root = tmp_path_factory.mktemp("vendor_kernels")
    src = root / "src"
    _write(src / "mi300x_bf16", MI300X, [("aten::mm", name, "c10::BFloat16") for name in MI300X_KERNELS],
           "hipLaunchKernel")
    _write(src / "b200_fp4", B200, [("aten::addmm", name, "c10::BFloat16") for name in B200_KERNELS],
           "cudaLaunchKernel")
    # a BF16 GEMM on a kernel no name list knows, and its FP32 twin on a SIMT SGEMM
    _write(src / "bf16_unknown_kernel", H100, [("aten::mm", "vendor_gemm_kernel_v9", "c10::BFloat16")],
           "cudaLaunchKernel")
    _write(src / "fp32_simt", H100, [("aten::mm", FP32_SIMT_GEMM, "float")], "cudaLaunchKernel")
    write_trace(src / "mi300x_ddp", 0, 8, _ddp_step_events())
    _write(src / "comm_kernel_names", H100, [("c10d::allreduce_", name, None) for name in COMMUNICATION_KERNELS],
           "cudaLaunchKernel")
    marts = {"kernel_stats", "recommendations", "comm_overlap_by_step", "step_breakdown", "kernel_type_breakdown"}
    build_lake(src, root / "lake", marts)
    rows: dict[str, dict[str, list[dict]]] = {}
    for mart in marts:
        for row in read_mart(root / "lake", mart):
            rows.setdefault(mart, {}).setdefault(row["run_id"], []).append(row)
    return rows


@pytest.mark.parametrize(("run_id", "expected"), [("mi300x_bf16", MI300X_KERNELS), ("b200_fp4", B200_KERNELS)])
def test_tensor_and_matrix_core_kernels(vendor_lake, run_id: str, expected: dict[str, bool]) -> None:
    ours = {r["kernel_name"]: r["uses_tensor_cores"] for r in vendor_lake["kernel_stats"][run_id]}
    assert ours == expected


@pytest.mark.parametrize("run_id", ["mi300x_bf16", "b200_fp4", "bf16_unknown_kernel"])
def test_no_autocast_advice_where_gemms_are_low_precision(vendor_lake, run_id: str) -> None:
    rules = {r["rule"] for r in vendor_lake.get("recommendations", {}).get(run_id, [])}
    assert "tensor_cores_unused" not in rules


def test_autocast_advice_on_fp32_gemms(vendor_lake) -> None:
    """tb_plugin's rule still fires where it is right: FP32 GEMMs on SIMT kernels, all kernel time eligible."""
    (row,) = [r for r in vendor_lake["recommendations"]["fp32_simt"] if r["rule"] == "tensor_cores_unused"]
    assert row["metric_value"] == 1.0


def test_one_classification_of_communication_kernels(vendor_lake) -> None:
    ours = {r["kernel_name"]: r["kernel_type"] for r in vendor_lake["kernel_stats"]["comm_kernel_names"]}
    assert ours == {name: "COMMUNICATION" if comm else "COMPUTATION" for name, comm in COMMUNICATION_KERNELS.items()}
    types = {r["kernel_type"] for r in vendor_lake["kernel_type_breakdown"]["comm_kernel_names"]}
    assert {"COMMUNICATION", "COMPUTATION"} <= types


def test_rccl_kernels_are_communication_in_every_step_table(vendor_lake) -> None:
    """The MI300X DDP step: GEMM kernel [10, 40] µs; communication = the nccl:all_reduce range [44, 48] and the RCCL
    kernel [50, 80], which tb_plugin's External-id rule left as computation."""
    (overlap,) = vendor_lake["comm_overlap_by_step"]["mi300x_ddp"]
    assert [overlap[c] for c in ("computation_ns", "overlapping_ns", "communication_ns", "other_ns", "total_ns")] == \
        [30_000, 0, 34_000, 36_000, 100_000]
    (breakdown,) = vendor_lake["step_breakdown"]["mi300x_ddp"]
    assert (breakdown["kernel_ns"], breakdown["communication_ns"]) == (30_000, 34_000)
