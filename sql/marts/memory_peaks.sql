-- One row per device of a trace with memory curve points: the peak allocated and reserved bytes, when allocated
-- first reached its peak, and the host ProfilerStep#N range ([start, end)) holding that moment (null if none).
-- grain: run_id, trace_id, device
-- source: torch-tb-profiler 0.4.3 run.py::get_memory_curve (peaks = max Total Allocated); ANCHORS.md §3.8
-- column: peak_allocated_bytes: highest allocated
-- column: peak_reserved_bytes: highest reserved
-- column: peak_ts_ns: when allocated first reached its peak
-- column: peak_step: the ProfilerStep holding that moment (empty if none)
with

curve as (
    select * from int_memory_records where on_curve and device is not null
),

peaks as (
    select
        run_id,
        trace_id,
        device,
        max(total_allocated_bytes) as peak_allocated_bytes,
        max(total_reserved_bytes) as peak_reserved_bytes,
        arg_min(ts_ns, (-total_allocated_bytes, ts_ns, event_idx)) as peak_ts_ns,
        any_value(rank) as rank
    from curve
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
    peaks.rank
from peaks
left join peak_steps using (trace_id, device)
