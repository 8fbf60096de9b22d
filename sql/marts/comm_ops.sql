-- One row per communication op name of a trace (torch-tb-profiler's "Communication Operations Stats"): calls,
-- size = Σ prod(Input Dims) × bytes of Input type (needs record_shapes; In msg nelems is not used), latency = union
-- of the nodes' ranges (the op's own host range and its kernels), data transfer = union of their transfer ranges
-- (see int_tb_comm_ranges and int_tb_comm_unions; tb_view_enabled false = tb_plugin would not have shown this table).
-- grain: run_id, trace_id, name
-- source: torch-tb-profiler 0.4.3 communication.py analyze_communication_nodes, run_generator.py _generate_ops_table; ANCHORS.md §3.7
-- column: name: communication op name (nccl:all_reduce, gloo:broadcast, ...)
-- column: total_bytes: bytes over all calls
-- column: avg_bytes: bytes per call
-- column: total_latency_ns: union of the op's host range and its kernels, summed
-- column: avg_latency_ns: latency per call
-- column: data_transfer_ns: time moving data, summed
-- column: avg_data_transfer_ns: data transfer per call
with

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

unions as (
    select run_id, trace_id, name, communication_ns as total_latency_ns, transfer_ns as data_transfer_ns
    from int_tb_comm_unions
    where grouped_by = 'name'
),

flags as (
    select run_id, trace_id, bool_and(tb_view_enabled) as tb_view_enabled
    from int_tb_comm_ranges
    group by run_id, trace_id
)

select
    calls.run_id,
    calls.trace_id,
    calls.name,
    calls.calls,
    calls.total_bytes::bigint as total_bytes,
    round(calls.total_bytes / calls.calls)::bigint as avg_bytes,  -- int64 like every *_bytes / *_ns column
    unions.total_latency_ns::bigint as total_latency_ns,
    round(unions.total_latency_ns / calls.calls)::bigint as avg_latency_ns,
    unions.data_transfer_ns::bigint as data_transfer_ns,
    round(unions.data_transfer_ns / calls.calls)::bigint as avg_data_transfer_ns,
    calls.rank,
    flags.tb_view_enabled
from calls
join unions using (run_id, trace_id, name)
join flags using (run_id, trace_id)
