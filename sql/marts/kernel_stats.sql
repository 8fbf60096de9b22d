-- One row per GPU kernel name of a trace, as torch-tb-profiler's Kernel view: calls, total/mean/min/max duration,
-- duration-weighted mean blocks per SM and est. achieved occupancy (missing values count as 0, all-zero weights
-- give 0; occupancy as a ratio = % / 100), tensor/matrix-core use by kernel name, and HTA's kernel type (with the
-- communication classification of int_kernels_classified). Only cat kernel rows: memcpy/memset are not kernels here.
-- Tensor/matrix-core kernels by vendor: NVIDIA, tb_plugin's allowlist (tensor_core.py: cuDNN/cuBLAS hmma, 884/1688/
-- 16816 shapes, xmma) plus every CUTLASS `tensorop` kernel (incl. wmma_tensorop, which the list misses), cuBLASLt's
-- `nvjet_*` (Hopper, Blackwell) and TensorRT-LLM's Blackwell batched GEMMs (`bmm_<dtypes>_…_sm100f`, FP8/FP4
-- block-scaled MxE4m3/MxE2m1 included); AMD, Tensile/hipBLASLt kernels with a matrix instruction
-- (`Cijk_…_MI16x16x1…`, MFMA whatever the dtype), composable-kernel xdlops kernels (`xdl`, `xdlops`) and MIOpen's
-- xdlops implicit GEMMs (`igemm_{fwd,bwd,wrw}_gtcx…`). Case matters: MIOpen's SubTensorOp is not a tensor op.
-- grain: run_id, trace_id, kernel_name
-- source: torch-tb-profiler 0.4.3 kernel_parser.py, tensor_core.py; HTA 0.5.0 get_kernel_type; ANCHORS.md §3.6, §2.2;
-- Tensile/hipBLASLt, composable_kernel, MIOpen and TensorRT-LLM kernel naming
-- column: mean_blocks_per_sm: duration-weighted mean blocks per SM
-- column: mean_est_achieved_occupancy_ratio: duration-weighted estimated achieved occupancy
-- column: uses_tensor_cores: the kernel runs on tensor cores (NVIDIA) or matrix cores (AMD MFMA), by its name
with

kernel_rows as (
    select
        classified.run_id,
        classified.trace_id,
        classified.rank,
        classified.name,
        classified.kernel_type,
        classified.dur_ns,
        coalesce(raw.blocks_per_sm, 0) as blocks_per_sm,
        coalesce(raw.est_achieved_occupancy_pct, 0) / 100.0 as occupancy_ratio
    from int_kernels_classified as classified
    join kernels as raw using (trace_id, event_idx)
    where classified.source_table = 'kernels'
        and lower(classified.cat) = 'kernel'
),

by_name as (
    select
        run_id,
        trace_id,
        name as kernel_name,
        any_value(kernel_type) as kernel_type,
        count(*) as calls,
        sum(dur_ns) as total_ns,
        round(avg(dur_ns))::bigint as mean_ns,  -- int64 ns like every *_ns column
        min(dur_ns) as min_ns,
        max(dur_ns) as max_ns,
        coalesce(sum(blocks_per_sm * dur_ns) / nullif(sum(dur_ns), 0), 0) as mean_blocks_per_sm,
        coalesce(sum(occupancy_ratio * dur_ns) / nullif(sum(dur_ns), 0), 0) as mean_est_achieved_occupancy_ratio,
        any_value(rank) as rank
    from kernel_rows
    group by run_id, trace_id, name
)

select
    run_id,
    trace_id,
    kernel_name,
    kernel_type,
    calls,
    total_ns,
    mean_ns,
    min_ns,
    max_ns,
    mean_blocks_per_sm,
    mean_est_achieved_occupancy_ratio,
    regexp_matches(
        kernel_name,
        -- tb_plugin's allowlist
        'h884|s884|h1688|s1688|hmma|i8816|16816|dgrad_1x1_stride_2x2|first_layer_wgrad_kernel|conv1x1|conv2d_c1_k1'
        || '|direct_group|xmma_implicit_gemm|xmma_sparse_conv|xmma_warp_specialized_implicit_gemm|xmma_gemm'
        || '|xmma_sparse_gemm|c1688'
        -- NVIDIA beyond it: CUTLASS tensor ops, cuBLASLt nvjet, TensorRT-LLM Blackwell batched GEMMs
        || '|tensorop|^nvjet_|^bmm_.*_sm1[0-2][0-9][af]?$'
        -- AMD matrix cores: Tensile/hipBLASLt MFMA, composable-kernel xdlops, MIOpen xdlops implicit GEMM
        || '|^Cijk_.*_MI[0-9]+x[0-9]+x[0-9]+|xdl|^igemm_(fwd|bwd|wrw)_gtcx'
    ) as uses_tensor_cores,
    rank
from by_name
