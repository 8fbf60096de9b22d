-- One row per GPU kernel name of a trace, as torch-tb-profiler's Kernel view: calls, total/mean/min/max duration,
-- duration-weighted mean blocks per SM and est. achieved occupancy (missing values count as 0, all-zero weights
-- give 0; occupancy as a ratio = % / 100), tensor-core use by the name allowlist of tensor_core.py, and HTA's
-- kernel type. Only cat kernel rows: memcpy/memset are not kernels here.
-- grain: run_id, trace_id, kernel_name
-- source: torch-tb-profiler 0.4.3 kernel_parser.py, tensor_core.py; HTA 0.5.0 get_kernel_type; ANCHORS.md §3.6, §2.2
-- column: mean_blocks_per_sm: duration-weighted mean blocks per SM
-- column: mean_est_achieved_occupancy_ratio: duration-weighted estimated achieved occupancy
-- column: uses_tensor_cores: the kernel's name is on tb_plugin's tensor-core list
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
        'h884|s884|h1688|s1688|hmma|i8816|16816|dgrad_1x1_stride_2x2|first_layer_wgrad_kernel|conv1x1|conv2d_c1_k1'
        || '|direct_group|xmma_implicit_gemm|xmma_sparse_conv|xmma_warp_specialized_implicit_gemm|xmma_gemm'
        || '|xmma_sparse_gemm|c1688'
    ) as uses_tensor_cores,
    rank
from by_name
