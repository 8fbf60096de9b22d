-- One row per GPU and time bucket of a trace: torch-tb-profiler's trace-view utilization counter. Buckets are
-- 10^k µs, the smallest such size giving at most 100 of them over the `PyTorch Profiler (0)` span (or, without it,
-- the span of all events tb_plugin reads), and the last bucket stretches to the span end. Utilization = busy time
-- (union of kernels, all of them, not only those in steps) / bucket length; Est. SM efficiency = the time-weighted
-- mean over the bucket of tb_plugin's SM-efficiency counter ranges (null for a GPU without blocks per SM).
-- grain: run_id, trace_id, device, bucket_start_ns
-- source: torch-tb-profiler 0.4.3 gpu_metrics_parser.py (calculate_gpu_utilization get_bucket_info, get_gpu_metrics); ANCHORS.md §3.5
-- column: bucket_start_ns: the bucket's start
-- column: bucket_ns: bucket length
-- column: bucket_end_ns: the bucket's end
-- column: gpu_utilization_ratio: kernel busy time / bucket length
-- column: est_sm_efficiency_ratio: estimated SM efficiency in the bucket
with

profiler_span as (
    select run_id, trace_id, arg_max(ts_ns, ts_ns) as span_start_ns, arg_max(end_ns, ts_ns) as span_end_ns
    from profiler_spans
    where cat = 'Trace' and name = 'PyTorch Profiler (0)'
    group by run_id, trace_id
),

-- Without the profiler span, tb_plugin uses the min/max of every event it reads.
read_events as (
    select run_id, trace_id, ts_ns, end_ns from kernels where lower(cat) = 'kernel'
    union all
    select run_id, trace_id, ts_ns, end_ns from gpu_memcpy
    union all
    select run_id, trace_id, ts_ns, end_ns from gpu_memset
    union all
    select run_id, trace_id, ts_ns, end_ns from runtime_calls where lower(cat) = 'runtime'
    union all
    select run_id, trace_id, ts_ns, end_ns from cpu_ops
    union all
    select run_id, trace_id, ts_ns, end_ns from python_functions
    union all
    select run_id, trace_id, start_ns, end_ns from int_tb_comm_ops
    union all
    select run_id, trace_id, ts_ns, end_ns from steps
    union all
    select run_id, trace_id, ts_ns, end_ns from profiler_spans where cat = 'Trace'
),

event_span as (
    select run_id, trace_id, min(ts_ns) as span_start_ns, max(end_ns) as span_end_ns
    from read_events
    group by run_id, trace_id
),

span as (
    select
        event_span.run_id,
        event_span.trace_id,
        coalesce(profiler_span.span_start_ns, event_span.span_start_ns) as span_start_ns,
        coalesce(profiler_span.span_end_ns, event_span.span_end_ns) as span_end_ns
    from event_span
    left join profiler_span using (run_id, trace_id)
),

bucket_size as (
    select
        span.*,
        (
            select min(1000 * 10::bigint ** k)
            from range(0, 16) as powers(k)
            where span.span_end_ns - span.span_start_ns <= 100 * 1000 * 10::bigint ** k
        )::bigint as size_ns
    from span
),

devices_used as (
    select
        gpu_kernels.run_id,
        gpu_kernels.trace_id,
        gpu_kernels.device,
        any_value(gpu_kernels.rank) as rank,
        bool_or(gpu_kernels.blocks_per_sm > 0) as has_blocks_per_sm
    from kernels as gpu_kernels
    where lower(gpu_kernels.cat) = 'kernel' and gpu_kernels.device is not null
    group by all
),

grid as (
    select
        devices_used.*,
        bucket_size.span_start_ns,
        bucket_size.span_end_ns,
        bucket_size.size_ns,
        (bucket_size.span_end_ns - bucket_size.span_start_ns) // bucket_size.size_ns as buckets
    from devices_used
    join bucket_size using (run_id, trace_id)
),

buckets as (
    select
        grid.run_id,
        grid.trace_id,
        grid.device,
        grid.rank,
        grid.has_blocks_per_sm,
        bucket_idx,
        grid.span_start_ns + bucket_idx * grid.size_ns as bucket_start_ns,
        case
            when bucket_idx = grid.buckets - 1 then grid.span_end_ns
            else grid.span_start_ns + (bucket_idx + 1) * grid.size_ns
        end as bucket_end_ns
    from grid, range(0, grid.buckets) as idx(bucket_idx)
),

-- Each busy segment goes to the buckets it overlaps (computed, not searched; the last bucket is the longer one).
segment_buckets as (
    select
        seg.run_id,
        seg.trace_id,
        seg.device,
        seg.seg_start_ns,
        seg.seg_end_ns,
        seg.sm_efficiency,
        unnest(range(
            least(grid.buckets - 1, greatest(0, (seg.seg_start_ns - grid.span_start_ns) // grid.size_ns)),
            least(grid.buckets - 1, (seg.seg_end_ns - 1 - grid.span_start_ns) // grid.size_ns) + 1
        )) as bucket_idx
    from int_tb_gpu_segments as seg
    join grid using (run_id, trace_id, device)
    where seg.seg_end_ns > grid.span_start_ns and seg.seg_start_ns < grid.span_end_ns and grid.buckets > 0
),

per_bucket as (
    select
        segment_buckets.run_id,
        segment_buckets.trace_id,
        segment_buckets.device,
        segment_buckets.bucket_idx,
        sum(overlap_ns) as busy_ns,
        sum(sm_efficiency * overlap_ns) as sm_weighted_ns
    from (
        select
            segment_buckets.*,
            least(seg_end_ns, bucket_end_ns) - greatest(seg_start_ns, bucket_start_ns) as overlap_ns
        from segment_buckets
        join buckets using (run_id, trace_id, device, bucket_idx)
    ) as segment_buckets
    where overlap_ns > 0
    group by all
)

select
    buckets.run_id,
    buckets.trace_id,
    buckets.device,
    buckets.bucket_start_ns,
    buckets.bucket_end_ns - buckets.bucket_start_ns as bucket_ns,
    coalesce(per_bucket.busy_ns, 0) / (buckets.bucket_end_ns - buckets.bucket_start_ns) as gpu_utilization_ratio,
    case
        when buckets.has_blocks_per_sm
            then coalesce(per_bucket.sm_weighted_ns, 0) / (buckets.bucket_end_ns - buckets.bucket_start_ns)
    end as est_sm_efficiency_ratio,
    buckets.rank,
    buckets.bucket_end_ns
from buckets
left join per_bucket using (run_id, trace_id, device, bucket_idx)
