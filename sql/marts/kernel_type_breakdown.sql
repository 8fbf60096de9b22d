-- One row per trace and GPU time class: time during which exactly that set of kernel types is running, as in
-- HTA's kernel_type_df. COMPUTATION, COMMUNICATION and MEMORY events are each merged into busy intervals, then a
-- sweep with bit values 1/2/4 names every instant by the types running ("COMPUTATION overlapping COMMUNICATION"
-- etc., in that order). ratio = total_ns / the trace's summed total_ns (HTA reports it ×100, rounded to 0.1).
-- OTHER events (sync rows) are not classes here, as in HTA (include_memory_kernels=True, the TraceAnalysis default).
-- Mimics HTA 0.5.0 exactly: integer-µs timestamps (×1000 here) and HTA's window (see int_hta_window).
-- grain: run_id, trace_id, kernel_type
-- source: holistictraceanalysis 0.5.0 hta/analyzers/breakdown_analysis.py::_get_gpu_kernel_type_time; see ANCHORS.md §2.3
with

typed as (
    select
        run_id,
        trace_id,
        rank,
        ts_us,
        end_us,
        case kernel_set when 'COMPUTATION' then 1 when 'COMMUNICATION' then 2 when 'MEMORY' then 4 end as bit
    from int_hta_merged_intervals
    where kernel_set in ('COMPUTATION', 'COMMUNICATION', 'MEMORY')
),

edges as (
    select run_id, trace_id, rank, ts_us as time_us, bit as delta from typed
    union all
    select run_id, trace_id, rank, end_us as time_us, -bit as delta from typed
),

points as (
    select run_id, trace_id, any_value(rank) as rank, time_us, sum(delta) as delta
    from edges
    group by run_id, trace_id, time_us
),

segments as (
    select
        run_id,
        trace_id,
        rank,
        sum(delta) over (partition by run_id, trace_id order by time_us) as running,
        lead(time_us) over (partition by run_id, trace_id order by time_us) - time_us as length_us
    from points
),

named as (
    select
        run_id,
        trace_id,
        rank,
        concat_ws(
            ' overlapping ',
            case when running & 1 = 1 then 'COMPUTATION' end,
            case when running & 2 = 2 then 'COMMUNICATION' end,
            case when running & 4 = 4 then 'MEMORY' end
        ) as kernel_type,
        length_us
    from segments
    where running > 0 and length_us is not null
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
    total_us / nullif(sum(total_us) over (partition by run_id, trace_id), 0) as ratio,
    rank
from totals
