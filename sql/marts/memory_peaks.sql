-- One row per device of a trace with allocator events: the peak allocated and reserved bytes, the peak of net
-- allocation since the trace began, when allocated first reached its peak, and the host ProfilerStep#N range
-- ([start, end)) holding that moment (null if none). Allocated and reserved peak over the memory curve's points
-- (records with an Addr and both totals); a trace without totals (the 2021 format) has them null, and its peak
-- moment is that of net allocation.
-- grain: run_id, trace_id, device
-- source: torch-tb-profiler 0.4.3 run.py::get_memory_curve (peaks = max Total Allocated); ANCHORS.md §3.8
-- column: peak_allocated_bytes: highest allocated (null without totals)
-- column: peak_reserved_bytes: highest reserved (null without totals)
-- column: peak_net_allocated_bytes: highest net allocation since the trace began (memory_timeline.net_allocated_bytes)
-- column: peak_ts_ns: when allocated (net allocated, without totals) first reached its peak
-- column: peak_step: the ProfilerStep holding that moment (empty if none)
with

records as (
    select * from int_memory_records where device is not null
),

peaks as (
    select
        run_id,
        trace_id,
        device,
        max(total_allocated_bytes) filter (where on_curve) as peak_allocated_bytes,
        max(total_reserved_bytes) filter (where on_curve) as peak_reserved_bytes,
        max(net_allocated_bytes) as peak_net_allocated_bytes,
        coalesce(
            arg_min(ts_ns, (-total_allocated_bytes, ts_ns, event_idx)) filter (where on_curve),
            arg_min(ts_ns, (-net_allocated_bytes, ts_ns, event_idx))
        ) as peak_ts_ns,
        any_value(rank) as rank
    from records
    group by all
),

peak_steps as (
    select peaks.trace_id, peaks.device, min(steps.step) as step
    from peaks
    join steps
        on steps.trace_id = peaks.trace_id
        and peaks.peak_ts_ns >= steps.ts_ns
        and peaks.peak_ts_ns < steps.end_ns
    group by all
)

select
    peaks.run_id,
    peaks.trace_id,
    peaks.device,
    peaks.peak_allocated_bytes,
    peaks.peak_reserved_bytes,
    peaks.peak_ts_ns,
    peak_steps.step as peak_step,
    peaks.peak_net_allocated_bytes,
    peaks.rank
from peaks
left join peak_steps using (trace_id, device)
