-- One row per step of a trace holding communication nodes: the union of the nodes' ranges split into data transfer
-- (the union of their transfer ranges; see int_tb_comm_ranges and int_tb_comm_unions) and synchronizing =
-- communication - transfer, not clipped to the step. tb_view_enabled is false where tb_plugin would have disabled
-- its distributed view (unequal node or range counts across the ranks of the window, or a rank without
-- communication); the numbers are then what could be matched by position, min_matched_ranks is the fewest ranks any
-- of the step's ranges was matched across.
-- grain: run_id, rank, step, trace_id
-- source: torch-tb-profiler 0.4.3 Distributed "Synchronizing/Communication Overview" (communication.py analyze_communication_nodes, run_generator.py _generate_wait_graph); ANCHORS.md §3.7
-- column: data_transfer_ns: time moving data (the minimum over ranks of each collective)
-- column: synchronizing_ns: time waiting for other ranks
-- column: communication_ns: union of the step's communication ranges
-- column: ranks_in_window: ranks whose traces cover the step
-- column: min_matched_ranks: fewest ranks any range was matched across
with

step_info as (
    select
        run_id,
        trace_id,
        step,
        any_value(rank) as rank,
        bool_and(tb_view_enabled) as tb_view_enabled,
        any_value(ranks_in_window) as ranks_in_window,
        min(matched_ranks) as min_matched_ranks
    from int_tb_comm_ranges
    where step is not null
    group by run_id, trace_id, step
),

unions as (
    select run_id, trace_id, step, communication_ns, transfer_ns
    from int_tb_comm_unions
    where grouped_by = 'step'
)

select
    step_info.run_id,
    step_info.rank,
    step_info.step,
    unions.transfer_ns::bigint as data_transfer_ns,
    (unions.communication_ns - unions.transfer_ns)::bigint as synchronizing_ns,
    step_info.trace_id,
    unions.communication_ns::bigint as communication_ns,
    step_info.tb_view_enabled,
    step_info.ranks_in_window,
    step_info.min_matched_ranks
from step_info
join unions using (run_id, trace_id, step)
