-- One row per host event that torch-tb-profiler 0.4.3 treats as a communication op: a cpu_op/Operator or a
-- (gpu_)user_annotation whose name is in its NcclOpNameSet or GlooOpNameSet (exact names, so all_to_all, send/recv,
-- _allgather_base and coalesced ops are not communication for it).
-- grain: run_id, trace_id, event_idx
-- source: torch-tb-profiler 0.4.3 trace.py (NcclOpNameSet, GlooOpNameSet, create_trace_event); ANCHORS.md §3.7
with

comm_names as (
    select unnest([
        'nccl:broadcast', 'nccl:reduce', 'nccl:all_reduce', 'nccl:all_gather', 'nccl:reduce_scatter',
        'gloo:broadcast', 'gloo:reduce', 'gloo:all_reduce', 'gloo:all_gather', 'gloo:reduce_scatter'
    ]) as name
),

host_ops as (
    select run_id, trace_id, rank, event_idx, name, ts_ns, end_ns, external_id, input_dims, input_types
    from cpu_ops
    union all
    select run_id, trace_id, rank, event_idx, name, ts_ns, end_ns, external_id, input_dims, input_types
    from annotations
)

select
    host_ops.run_id,
    host_ops.trace_id,
    host_ops.rank,
    host_ops.event_idx,
    host_ops.name,
    split_part(host_ops.name, ':', 1) as comm_lib,
    host_ops.ts_ns as start_ns,
    host_ops.end_ns,
    host_ops.external_id,
    host_ops.input_dims,
    host_ops.input_types
from host_ops
semi join comm_names using (name)
