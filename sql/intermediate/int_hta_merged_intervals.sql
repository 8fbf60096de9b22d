-- One row per merged busy interval of a trace's GPU timeline, per kernel set: each HTA kernel_type alone
-- (COMPUTATION, COMMUNICATION, MEMORY, OTHER) and ALL events together. Merging follows HTA's
-- merge_kernel_intervals: sort by start, an event opens a new interval when it starts strictly after the running
-- max of the previous ends (touching intervals merge). Times in HTA integer µs.
-- Deliberate difference: an event never ends before it starts. HTA's integer µs (ceil of the start, floor of the
-- end) give an event under a µs a length of -1; alone in a merged interval it took that µs off the union of ALL
-- events but not off the union of one type, so HTA's non-compute time came out negative (-17 µs on an H100
-- inference trace with 22 sub-µs memsets between kernels, where HTA 0.5.0 stops on its own assert). Such an event
-- counts 0 µs here; an event of at least a µs merges as in HTA.
-- grain: run_id, trace_id, kernel_set, ts_us
-- source: holistictraceanalysis 0.5.0 hta/utils/utils.py::merge_kernel_intervals; see ANCHORS.md §2.3
with

clamped as (
    select run_id, trace_id, rank, kernel_type, ts_us, greatest(end_us, ts_us) as end_us, event_idx
    from int_hta_gpu_events
),

events as (
    select run_id, trace_id, rank, kernel_type as kernel_set, ts_us, end_us, event_idx
    from clamped
    union all
    select run_id, trace_id, rank, 'ALL' as kernel_set, ts_us, end_us, event_idx
    from clamped
),

flagged as (
    select
        *,
        case
            when ts_us > max(end_us) over (
                partition by run_id, trace_id, kernel_set
                order by ts_us, end_us desc, event_idx
                rows between unbounded preceding and 1 preceding
            ) then 1
            else 0
        end as opens_interval
    from events
),

grouped as (
    select
        *,
        sum(opens_interval) over (
            partition by run_id, trace_id, kernel_set
            order by ts_us, end_us desc, event_idx
            rows between unbounded preceding and current row
        ) as interval_no
    from flagged
)

select
    run_id,
    trace_id,
    any_value(rank) as rank,
    kernel_set,
    min(ts_us) as ts_us,
    max(end_us) as end_us,
    count(*) as event_count
from grouped
group by run_id, trace_id, kernel_set, interval_no
