-- The GPU timeline of each trace cut at every edge of a merged busy interval, each piece labelled with the
-- kernel types running during it as a bitmask (COMPUTATION 1, COMMUNICATION 2, MEMORY 4): the sweep behind
-- HTA's kernel_type_df and its communication/computation overlap. Integer µs, HTA's window.
-- source: holistictraceanalysis 0.5.0 hta/analyzers/breakdown_analysis.py::_get_gpu_kernel_type_time,
-- communication_analysis.py::get_comm_comp_overlap; see ANCHORS.md §2.3
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
        sum(delta) over (partition by run_id, trace_id order by time_us) as running_types,
        lead(time_us) over (partition by run_id, trace_id order by time_us) - time_us as length_us
    from points
)

select run_id, trace_id, rank, running_types, length_us
from segments
where running_types > 0 and length_us is not null
