-- One row per trace with GPU activity: how much of the communication time is hidden under computation, as HTA
-- computes it. Communication and computation kernels are each merged into busy intervals (union over all
-- streams); overlap_ns is the time both are busy; communication_ns is the merged communication time;
-- overlap_ratio = overlap_ns / communication_ns (null when the trace has no communication kernels; HTA gives NaN).
-- Mimics HTA 0.5.0 exactly: integer-µs timestamps (×1000 here) and HTA's window (see int_hta_window).
-- grain: run_id, trace_id
-- source: holistictraceanalysis 0.5.0 hta/analyzers/communication_analysis.py::get_comm_comp_overlap; see ANCHORS.md §2.3
with

edges as (
    select run_id, trace_id, ts_us as time_us, 1 as delta
    from int_hta_merged_intervals where kernel_set = 'COMMUNICATION'
    union all
    select run_id, trace_id, end_us as time_us, -1 as delta
    from int_hta_merged_intervals where kernel_set = 'COMMUNICATION'
    union all
    select run_id, trace_id, ts_us as time_us, 2 as delta
    from int_hta_merged_intervals where kernel_set = 'COMPUTATION'
    union all
    select run_id, trace_id, end_us as time_us, -2 as delta
    from int_hta_merged_intervals where kernel_set = 'COMPUTATION'
),

points as (
    select run_id, trace_id, time_us, sum(delta) as delta
    from edges
    group by run_id, trace_id, time_us
),

segments as (
    select
        run_id,
        trace_id,
        sum(delta) over (partition by run_id, trace_id order by time_us) as running,
        lead(time_us) over (partition by run_id, trace_id order by time_us) - time_us as length_us
    from points
),

overlap as (
    select run_id, trace_id, coalesce(sum(length_us) filter (where running = 3), 0) as overlap_us
    from segments
    group by run_id, trace_id
),

communication as (
    select run_id, trace_id, sum(end_us - ts_us) as communication_us
    from int_hta_merged_intervals
    where kernel_set = 'COMMUNICATION'
    group by run_id, trace_id
),

traces_with_gpu as (
    select run_id, trace_id, any_value(rank) as rank
    from int_hta_merged_intervals
    where kernel_set = 'ALL'
    group by run_id, trace_id
)

select
    traces_with_gpu.run_id,
    traces_with_gpu.trace_id,
    cast(coalesce(overlap.overlap_us, 0) * 1000 as bigint) as overlap_ns,
    cast(coalesce(communication.communication_us, 0) * 1000 as bigint) as communication_ns,
    overlap.overlap_us / nullif(communication.communication_us, 0) as overlap_ratio,
    traces_with_gpu.rank
from traces_with_gpu
left join overlap using (run_id, trace_id)
left join communication using (run_id, trace_id)
