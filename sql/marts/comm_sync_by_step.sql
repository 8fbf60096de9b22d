-- One row per step of a trace holding communication nodes: the union of the nodes' ranges split into data transfer
-- (the union of their transfer ranges, see int_tb_comm_ranges) and synchronizing = communication - transfer, not
-- clipped to the step. tb_view_enabled is false where tb_plugin would have disabled its distributed view (unequal
-- node or range counts across the ranks of the window, or a rank without communication); the numbers are then what
-- could be matched by position, min_matched_ranks is the fewest ranks any of the step's ranges was matched across.
-- grain: run_id, rank, step, trace_id
-- source: torch-tb-profiler 0.4.3 Distributed "Synchronizing/Communication Overview" (communication.py analyze_communication_nodes, run_generator.py _generate_wait_graph); ANCHORS.md §3.7
with

comm_ranges as materialized (
    select * from int_tb_comm_ranges
),

in_steps as materialized (
    select * from comm_ranges where step is not null
),

-- Union lengths: each range adds what it reaches beyond every range sorted before it.
communication as (
    select
        run_id,
        trace_id,
        step,
        greatest(0, end_ns - greatest(start_ns, coalesce(max(end_ns) over earlier, start_ns))) as added_ns
    from in_steps
    window earlier as (
        partition by run_id, trace_id, step order by start_ns, end_ns rows between unbounded preceding and 1 preceding
    )
),

transfer as (
    select
        run_id,
        trace_id,
        step,
        greatest(
            0,
            transfer_end_ns - greatest(transfer_start_ns, coalesce(max(transfer_end_ns) over earlier, transfer_start_ns))
        ) as added_ns
    from in_steps
    window earlier as (
        partition by run_id, trace_id, step
        order by transfer_start_ns, transfer_end_ns
        rows between unbounded preceding and 1 preceding
    )
),

step_info as (
    select
        run_id,
        trace_id,
        step,
        any_value(rank) as rank,
        bool_and(tb_view_enabled) as tb_view_enabled,
        any_value(ranks_in_window) as ranks_in_window,
        min(matched_ranks) as min_matched_ranks
    from in_steps
    group by run_id, trace_id, step
),

communication_sum as (
    select run_id, trace_id, step, sum(added_ns) as communication_ns from communication group by all
),

transfer_sum as (
    select run_id, trace_id, step, sum(added_ns) as transfer_ns from transfer group by all
)

select
    step_info.run_id,
    step_info.rank,
    step_info.step,
    transfer_sum.transfer_ns::bigint as data_transfer_ns,
    (communication_sum.communication_ns - transfer_sum.transfer_ns)::bigint as synchronizing_ns,
    step_info.trace_id,
    communication_sum.communication_ns::bigint as communication_ns,
    step_info.tb_view_enabled,
    step_info.ranks_in_window,
    step_info.min_matched_ranks
from step_info
join communication_sum using (run_id, trace_id, step)
join transfer_sum using (run_id, trace_id, step)
