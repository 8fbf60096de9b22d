-- Union lengths of a trace's communication ranges (int_tb_comm_ranges), grouped two ways: per op name (comm_ops)
-- and per step (comm_sync_by_step; ranges outside every step are left out). Per group, communication_ns is the
-- union of the nodes' whole ranges and transfer_ns the union of their data-transfer ranges.
-- grain: run_id, trace_id, grouped_by, name, step
-- source: torch-tb-profiler 0.4.3 communication.py analyze_communication_nodes (its get_ranges_sum over merged ranges)
with

ranges as materialized (
    select * from int_tb_comm_ranges
),

grouped as (
    select 'name' as grouped_by, name, null::bigint as step, * exclude (name, step)
    from ranges
    union all by name
    select 'step' as grouped_by, null::varchar as name, step, * exclude (name, step)
    from ranges
    where step is not null
),

bounds as (
    select run_id, trace_id, grouped_by, name, step, 'communication' as kind, start_ns, end_ns
    from grouped
    union all
    select run_id, trace_id, grouped_by, name, step, 'transfer' as kind, transfer_start_ns, transfer_end_ns
    from grouped
),

-- Each range adds what it reaches beyond every range sorted before it in its group: the sum is the union's length.
added as (
    select
        run_id, trace_id, grouped_by, name, step, kind,
        greatest(0, end_ns - greatest(start_ns, coalesce(max(end_ns) over earlier, start_ns))) as added_ns
    from bounds
    window earlier as (
        partition by run_id, trace_id, grouped_by, name, step, kind
        order by start_ns, end_ns
        rows between unbounded preceding and 1 preceding
    )
)

select
    run_id,
    trace_id,
    grouped_by,
    name,
    step,
    sum(added_ns) filter (where kind = 'communication') as communication_ns,
    sum(added_ns) filter (where kind = 'transfer') as transfer_ns
from added
group by run_id, trace_id, grouped_by, name, step
