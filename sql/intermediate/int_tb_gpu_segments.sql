-- One row per elementary segment of a GPU's kernel activity (between two consecutive kernel starts/ends of that
-- device, `args.device`): whether any kernel runs (busy) and torch-tb-profiler's Est. SM Efficiency value there,
-- min(1, Σ blocks per SM of the kernels running), where kernels without a positive `blocks per SM` add nothing.
-- Idle segments are left out. Memcpy/memset do not count, as in tb_plugin's GPU metrics.
-- grain: run_id, trace_id, device, seg_start_ns
-- source: torch-tb-profiler 0.4.3 gpu_metrics_parser.py (calculate_gpu_utilization, range_utils.merge_ranges_with_value); ANCHORS.md §3.5
with

gpu_kernels as (
    select
        run_id,
        trace_id,
        rank,
        device,
        ts_ns,
        end_ns,
        case when blocks_per_sm > 0 then blocks_per_sm::decimal(38, 9) else 0 end as blocks_per_sm
    from kernels
    where lower(cat) = 'kernel' and device is not null and end_ns > ts_ns
),

boundaries as (
    select run_id, trace_id, rank, device, ts_ns as t, 1 as delta, blocks_per_sm from gpu_kernels
    union all
    select run_id, trace_id, rank, device, end_ns, -1, -blocks_per_sm from gpu_kernels
),

points as (
    select run_id, trace_id, any_value(rank) as rank, device, t, sum(delta) as delta, sum(blocks_per_sm) as blocks_per_sm
    from boundaries
    group by run_id, trace_id, device, t
),

segments as (
    select
        run_id,
        trace_id,
        rank,
        device,
        t as seg_start_ns,
        lead(t) over by_time as seg_end_ns,
        sum(delta) over running as running_kernels,
        sum(blocks_per_sm) over running as running_blocks_per_sm
    from points
    window
        by_time as (partition by run_id, trace_id, device order by t),
        running as (partition by run_id, trace_id, device order by t rows unbounded preceding)
)

select
    run_id,
    trace_id,
    device,
    seg_start_ns,
    rank,
    seg_end_ns,
    seg_end_ns - seg_start_ns as seg_ns,
    least(running_blocks_per_sm, 1)::double as sm_efficiency
from segments
where running_kernels > 0 and seg_end_ns is not null
