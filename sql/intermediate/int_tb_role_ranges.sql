-- One row per event interval that torch-tb-profiler 0.4.3 puts in one of its step-time roles (before merging):
-- 0 Kernel (other kernels), 1 Memcpy, 2 Memset, 3 Communication (communication kernels, int_kernels_classified's
-- one classification, kernels sharing the External id of a communication op, as tb_plugin links them, and the
-- communication op ranges themselves), 4 Runtime, 5 DataLoader, 6 CPU Exec. Deliberate difference: tb_plugin finds
-- communication kernels only under nccl:*/gloo:* ops, so NCCL/RCCL kernels launched by record_param_comms (whose
-- External id is its own) are computation to it.
-- 0.4.3 only knows the legacy category `Runtime` (not cuda_runtime), and drops every user_annotation except
-- ProfilerStep#N and the communication names; both follow from its EventTypeMap / create_trace_event.
-- Deliberate difference: recent PyTorch records the DataLoader (enumerate(DataLoader)#...__next__) as a
-- user_annotation, which 0.4.3 drops, leaving the loader's time to Other; it is DataLoader time here, as when it is
-- a cpu_op.
-- grain: run_id, trace_id, role, event_idx
-- source: torch-tb-profiler 0.4.3 event_parser.py StepParser._parse_step, trace.py EventTypeMap; ANCHORS.md §3.4
with

comm_ops as materialized (
    select * from int_tb_comm_ops
),

comm_external_ids as (
    select distinct run_id, trace_id, external_id
    from comm_ops
),

gpu_kernels as (
    select
        kernels.run_id,
        kernels.trace_id,
        kernels.rank,
        kernels.event_idx,
        kernels.ts_ns,
        kernels.end_ns,
        kernels.is_communication or comm_external_ids.trace_id is not null as is_comm
    from int_kernels_classified as kernels
    left join comm_external_ids
        on kernels.run_id = comm_external_ids.run_id
        and kernels.trace_id = comm_external_ids.trace_id
        and kernels.external_id is not distinct from comm_external_ids.external_id
    where kernels.source_table = 'kernels' and lower(kernels.cat) = 'kernel'
),

-- cpu ops, and the DataLoader's user annotations: recent PyTorch records enumerate(DataLoader)#...__next__ as a
-- user_annotation, which 0.4.3 drops (a deliberate difference: the loader's time is DataLoader time, as when it is
-- an op, rather than the step's idle "Other" time).
host_ops as (
    select
        *,
        (name like 'enumerate(DataLoader)#%' and name like '%.__next__') or name like 'enumerate(DataPipe)#%'
            as is_dataloader
    from (
        select run_id, trace_id, rank, event_idx, name, ts_ns, end_ns, false as is_annotation
        from cpu_ops
        anti join comm_ops using (run_id, trace_id, event_idx)
        where not starts_with(cpu_ops.name, 'ProfilerStep#')
        union all
        select run_id, trace_id, rank, event_idx, name, ts_ns, end_ns, true
        from annotations
        where not coalesce(on_device, false)
    )
    where not is_annotation or is_dataloader
)

select run_id, trace_id, rank, case when is_comm then 3 else 0 end as role, event_idx, ts_ns as start_ns, end_ns
from gpu_kernels
union all
select run_id, trace_id, rank, 1, event_idx, ts_ns, end_ns from gpu_memcpy
union all
select run_id, trace_id, rank, 2, event_idx, ts_ns, end_ns from gpu_memset
union all
select run_id, trace_id, rank, 3, event_idx, start_ns, end_ns from comm_ops
union all
select run_id, trace_id, rank, 4, event_idx, ts_ns, end_ns from runtime_calls where lower(cat) = 'runtime'
union all
select run_id, trace_id, rank, case when is_dataloader then 5 else 6 end, event_idx, ts_ns, end_ns from host_ops
union all
select run_id, trace_id, rank, 6, event_idx, ts_ns, end_ns from python_functions where lower(cat) = 'python'
