-- One row per trace and GPU time class: time during which exactly that set of kernel types is running, as in
-- HTA's kernel_type_df. COMPUTATION, COMMUNICATION and MEMORY events are each merged into busy intervals, then a
-- sweep with bit values 1/2/4 names every instant by the types running ("COMPUTATION overlapping COMMUNICATION"
-- etc., in that order). time_ratio = total_ns / the trace's summed total_ns (HTA reports it ×100, rounded to 0.1).
-- A state held only for an instant (a 0 µs interval, or an interval of one type ending as one of another starts:
-- "X overlapping Y") is a row with total_ns 0, as HTA reports it (see int_hta_type_segments).
-- OTHER events (sync rows) are not classes here, as in HTA (include_memory_kernels=True, the TraceAnalysis default).
-- Mimics HTA 0.5.0 exactly: integer-µs timestamps (×1000 here) and HTA's window (see int_hta_window).
-- grain: run_id, trace_id, kernel_type
-- source: holistictraceanalysis 0.5.0 hta/analyzers/breakdown_analysis.py::_get_gpu_kernel_type_time; see ANCHORS.md §2.3
-- column: kernel_type: the set of kernel types running at once (COMPUTATION overlapping COMMUNICATION, ...)
-- column: total_ns: time that set was running
-- column: ratio: share of the trace's GPU time (0-1)
with

named as (
    select
        run_id,
        trace_id,
        rank,
        concat_ws(
            ' overlapping ',
            case when running_types & 1 = 1 then 'COMPUTATION' end,
            case when running_types & 2 = 2 then 'COMMUNICATION' end,
            case when running_types & 4 = 4 then 'MEMORY' end
        ) as kernel_type,
        length_us
    from int_hta_type_segments
),

totals as (
    select run_id, trace_id, any_value(rank) as rank, kernel_type, sum(length_us) as total_us
    from named
    group by run_id, trace_id, kernel_type
)

select
    run_id,
    trace_id,
    kernel_type,
    cast(total_us * 1000 as bigint) as total_ns,
    total_us / nullif(sum(total_us) over (partition by run_id, trace_id), 0) as time_ratio,
    rank
from totals
