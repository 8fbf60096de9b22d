-- The memory curve of the run $run_id, one row per GPU (or CPU) of a trace and time bucket: $points buckets over the
-- run's memory events, each keeping its highest allocated memory (the curve's shape in a light page). Events of the
-- 2021 trace format carry no allocator totals (quality issue memory_totals_missing): their curve is the memory
-- allocated since the trace began (memory_timeline.net_allocated_bytes).
-- grain: run_id, rank, trace_id, device, ts_ns
-- source: torch-tb-profiler 0.4.3 memory curve (memory_parser.py); ANCHORS.md §3.6
-- column: ts_ns: the bucket's first event
-- column: allocated_bytes: the highest allocated memory in the bucket (net of the trace's start where totals are missing)
-- column: is_net: true where the curve is the memory allocated since the trace began
-- column: traces_per_rank: the rank's traces (a series is labelled by its trace when a rank has several)
with

totals_missing as (
    select count(*) > 0 as is_net
    from quality_issues
    where run_id = $run_id and code = 'memory_totals_missing'
),

events as (
    select
        memory_timeline.run_id,
        memory_timeline.rank,
        memory_timeline.trace_id,
        memory_timeline.device,
        memory_timeline.ts_ns,
        if(totals_missing.is_net, memory_timeline.net_allocated_bytes, memory_timeline.allocated_bytes)
            as allocated_bytes,
        totals_missing.is_net,
        count(distinct memory_timeline.trace_id) over (partition by memory_timeline.rank) as traces_per_rank,
        min(memory_timeline.ts_ns) over () as t0,
        max(memory_timeline.ts_ns) over () as t1
    from memory_timeline
    cross join totals_missing
    where memory_timeline.run_id = $run_id
)

select
    run_id,
    rank,
    trace_id,
    device,
    min(ts_ns) as ts_ns,
    max(allocated_bytes) as allocated_bytes,
    any_value(is_net) as is_net,
    any_value(traces_per_rank) as traces_per_rank
from events
where allocated_bytes is not null
group by run_id, rank, trace_id, device, floor((ts_ns - t0) * $points / greatest(t1 - t0, 1))
order by rank, trace_id, device, ts_ns
