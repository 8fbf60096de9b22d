-- The GPU timeline of each trace cut at every edge of a merged busy interval, each piece labelled with the
-- kernel types running during it as a bitmask (COMPUTATION 1, COMMUNICATION 2, MEMORY 4): the sweep behind
-- HTA's kernel_type_df and its communication/computation overlap. Integer µs, HTA's window.
-- As in HTA, edges are taken one at a time, so where several meet at one instant each state between them is a
-- piece of length 0: HTA reports such a state as a kernel type with 0 µs (a zero-length MEMORY interval, or
-- "COMPUTATION overlapping COMMUNICATION" where a communication interval ends as a computation one starts).
-- Order at an instant: every start before any end, then by type (COMPUTATION, COMMUNICATION, MEMORY). HTA sorts
-- the edges by time with numpy's quicksort, which keeps ties in insertion order (by type, a start before an end of
-- one type) on up to 16 edges only: on a real trace, where one type's interval ends as another's starts, it takes
-- the start first about always and reports "X overlapping Y" for 0 µs. Starts first, the row is always there (on
-- a trace of fewer than 17 edges HTA may leave it out).
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
    select run_id, trace_id, rank, ts_us as time_us, bit, false as is_end, ts_us from typed
    union all
    select run_id, trace_id, rank, end_us as time_us, bit, true as is_end, ts_us from typed
),

segments as (
    select
        run_id,
        trace_id,
        rank,
        sum(if(is_end, -bit, bit)) over sweep as running_types,
        lead(time_us) over sweep - time_us as length_us
    from edges
    window sweep as (
        partition by run_id, trace_id order by time_us, is_end, bit, ts_us rows unbounded preceding
    )
)

select run_id, trace_id, rank, running_types, length_us
from segments
where running_types > 0 and length_us is not null
