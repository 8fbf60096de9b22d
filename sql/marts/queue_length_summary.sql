-- One row per trace and GPU stream: statistics of the stream's launch queue length, as HTA's summary.
-- The queue length is the number of GPU events (kernels, memcpy, memset) whose launch call has run on the
-- CPU but which have not yet started on the GPU: +1 at each launch call, -1 at the launched event's start, summed
-- per stream in time order. Like HTA, the statistics are over the series' change points (one per launch and one
-- per start: point_count = 2 x launched events), not weighted by time; std is the sample standard deviation and
-- the quartiles interpolate linearly (pandas describe). full_queue_ns is HTA's time spent blocked on a full queue:
-- the time the length stays at or above CUDA's 1024-entry launch queue.
-- Mimics HTA 0.5.0: integer-µs timestamps and HTA's window (see int_hta_window); a launch call counts when a kept
-- GPU event has its correlation id.
-- Deliberate differences: HTA sorts the changes with an unstable sort, so changes in the same µs come in an
-- arbitrary order, and the points of a tie (never the length after it) depend on it; we put launches first (a
-- launch precedes the start of its own event). We count the one-event launch calls of int_launch_calls, HTA's
-- list plus cuLaunchKernelEx, cudaLaunchCooperativeKernel and HIP's other kernel launches; like HTA we leave out
-- graph launches, whose kernels share one call and whose use of the launch queue the trace does not tell. HTA
-- keeps only the last stream's full-queue time per rank; we report every stream's.
-- grain: run_id, trace_id, stream
-- source: holistictraceanalysis 0.5.0 hta/analyzers/trace_counters.py::get_queue_length_summary, get_time_spent_blocked_on_full_queue; see ANCHORS.md §2.3
-- column: point_count: points of the queue-length series (each launch and each start)
-- column: mean_length: mean queue length over the points
-- column: std_length: sample standard deviation of the queue length over the points
-- column: min_length: shortest queue
-- column: p25_length: 25th percentile of the queue length
-- column: p50_length: median queue length
-- column: p75_length: 75th percentile of the queue length
-- column: max_length: longest queue
-- column: full_queue_ns: time the queue held 1024 or more launched events
with

launches as (
    select run_id, trace_id, correlation, ts_us
    from int_hta_runtime
    where name in (select name from int_launch_calls)
        and not contains(name, 'GraphLaunch')
        and correlation is not null
),

launched_events as (
    select
        gpu.run_id,
        gpu.trace_id,
        gpu.rank,
        gpu.stream,
        launches.ts_us as launch_ts_us,
        gpu.ts_us as start_ts_us
    from int_hta_gpu_events as gpu
    join launches using (run_id, trace_id, correlation)
),

queue_changes as (
    select run_id, trace_id, rank, stream, launch_ts_us as ts_us, 1 as delta
    from launched_events
    union all
    select run_id, trace_id, rank, stream, start_ts_us, -1
    from launched_events
),

queue_series as (
    select
        *,
        (sum(delta) over stream_order)::bigint as queue_length,
        lead(ts_us) over stream_order - ts_us as held_us
    from queue_changes
    window stream_order as (
        partition by run_id, trace_id, stream
        order by ts_us, delta desc
        rows between unbounded preceding and current row
    )
)

select
    run_id,
    trace_id,
    stream,
    any_value(rank) as rank,
    count(*) as point_count,
    avg(queue_length) as mean_length,
    stddev_samp(queue_length) as std_length,
    min(queue_length) as min_length,
    quantile_cont(queue_length, 0.25) as p25_length,
    quantile_cont(queue_length, 0.5) as p50_length,
    quantile_cont(queue_length, 0.75) as p75_length,
    max(queue_length) as max_length,
    coalesce(sum(held_us) filter (where queue_length >= 1024), 0)::bigint * 1000 as full_queue_ns
from queue_series
group by run_id, trace_id, stream
