-- One row per communication op name of a trace (torch-tb-profiler's "Communication Operations Stats"): calls,
-- size = Σ prod(Input Dims) × bytes of Input type (needs record_shapes; In msg nelems is not used), latency = union
-- of the nodes' ranges (the op's own host range and its kernels), data transfer = union of their transfer ranges
-- (see int_tb_comm_ranges; tb_view_enabled false = tb_plugin would not have shown this table).
-- grain: run_id, trace_id, name
-- source: torch-tb-profiler 0.4.3 communication.py analyze_communication_nodes, run_generator.py _generate_ops_table; ANCHORS.md §3.7
with

comm_ranges as materialized (
    select * from int_tb_comm_ranges
),

latency as (
    select
        run_id,
        trace_id,
        name,
        greatest(0, end_ns - greatest(start_ns, coalesce(max(end_ns) over earlier, start_ns))) as added_ns
    from comm_ranges
    window earlier as (
        partition by run_id, trace_id, name order by start_ns, end_ns rows between unbounded preceding and 1 preceding
    )
),

transfer as (
    select
        run_id,
        trace_id,
        name,
        greatest(
            0,
            transfer_end_ns - greatest(transfer_start_ns, coalesce(max(transfer_end_ns) over earlier, transfer_start_ns))
        ) as added_ns
    from comm_ranges
    window earlier as (
        partition by run_id, trace_id, name
        order by transfer_start_ns, transfer_end_ns
        rows between unbounded preceding and 1 preceding
    )
),

calls as (
    select
        run_id,
        trace_id,
        name,
        any_value(rank) as rank,
        count(*) as calls,
        sum(size_bytes) as total_bytes
    from int_tb_comm_nodes
    group by run_id, trace_id, name
),

flags as (
    select run_id, trace_id, bool_and(tb_view_enabled) as tb_view_enabled
    from comm_ranges
    group by run_id, trace_id
),

latency_sum as (
    select run_id, trace_id, name, sum(added_ns) as total_latency_ns from latency group by all
),

transfer_sum as (
    select run_id, trace_id, name, sum(added_ns) as data_transfer_ns from transfer group by all
)

select
    calls.run_id,
    calls.trace_id,
    calls.name,
    calls.calls,
    calls.total_bytes::bigint as total_bytes,
    calls.total_bytes / calls.calls as avg_bytes,
    latency_sum.total_latency_ns::bigint as total_latency_ns,
    latency_sum.total_latency_ns / calls.calls as avg_latency_ns,
    transfer_sum.data_transfer_ns::bigint as data_transfer_ns,
    transfer_sum.data_transfer_ns / calls.calls as avg_data_transfer_ns,
    calls.rank,
    flags.tb_view_enabled
from calls
join latency_sum using (run_id, trace_id, name)
join transfer_sum using (run_id, trace_id, name)
join flags using (run_id, trace_id)
