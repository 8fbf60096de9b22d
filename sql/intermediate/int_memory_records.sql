-- One row per [memory] allocator event with its integer device (-1 for CPU, the device id for an accelerator, null for
-- the device types that hold no memory of their own), whether it is on the memory curve (has an Addr and both
-- totals), and the innermost node of torch-tb-profiler's op tree containing its ts ([start, end)) on the same tid:
-- node_pos/node_event_idx, and attached_to_op when that node is an operator node (records whose innermost node is a
-- ProfilerStep, module, DataLoader or Optimizer range, or that lie outside every range, are attached to no op, as in
-- tb_plugin). net_allocated_bytes is the running sum of Bytes per device in time order: what the device allocated
-- since the trace began, the one curve 2021-format traces allow (their events have no totals and no Addr).
-- Device Type is c10::DeviceType: CPU 0; the accelerators CUDA 1, HIP 6 (ROCm), XPU 12, MPS 13, HPU 15, MTIA 19,
-- PrivateUse1 20 and the rest are devices; MKLDNN 2 and IDEEP 5 (CPU layouts), Meta 14 and Lazy 17 (no storage) are
-- not. tb_plugin knows only CPU and CUDA, and so drops the GPU memory of ROCm, XPU and MTIA traces: we do not.
-- source: torch-tb-profiler 0.4.3 memory_parser.py (MemoryParser.find_memory_nodes), node.py::is_operator_node;
-- c10/core/DeviceType.h (torch/headeronly/core/DeviceType.h)
with

records as (
    select
        run_id, trace_id, rank, pid, tid, event_idx, ts_ns, bytes, total_allocated_bytes, total_reserved_bytes,
        addr, device_type, device_id,
        case when device_type = 0 then -1 when device_type not in (2, 5, 14, 17) then device_id end as device
    from memory_events
),

-- Only the threads that hold records need their nodes swept (most traces record memory on few threads, or none).
nodes as (
    select *
    from int_op_nodes
    semi join (select distinct trace_id, tid from records) as record_threads
        on record_threads.trace_id = int_op_nodes.trace_id
        and record_threads.tid = int_op_nodes.thread_key
    where tree = 'tb_plugin'
),

-- Sweep per (trace, tid): at one instant, node ends come first, then node starts, then records, so a record at a
-- node's start is inside it and one at its end is not; zero-length nodes contain nothing.
points as (
    select trace_id, thread_key as tid, ts_ns as t, 1 as point_order, pos as ord, if(dur_ns > 0, 1, 0) as delta
    from nodes
    union all
    select trace_id, thread_key as tid, end_ns as t, 0 as point_order, pos as ord, -1 as delta
    from nodes
    where dur_ns > 0
    union all
    select trace_id, tid, ts_ns as t, 2 as point_order, event_idx as ord, 0 as delta
    from records
),

record_depth as (
    select
        trace_id, tid, ord as event_idx,
        sum(delta) over (partition by trace_id, tid order by t, point_order, ord rows unbounded preceding)
            - 1 as node_depth
    from points
    qualify point_order = 2
),

candidates as (
    select trace_id, thread_key as tid, ts_ns, depth, pos, event_idx, name, cat
    from nodes
    where dur_ns > 0
),

attached as (
    select
        records.*,
        node.pos as node_pos,
        node.event_idx as node_event_idx,
        node.name as node_name,
        node.cat as node_cat
    from records
    join record_depth using (trace_id, tid, event_idx)
    asof left join candidates as node
        on node.trace_id = records.trace_id
        and node.tid = records.tid
        and node.depth = record_depth.node_depth
        and node.ts_ns <= records.ts_ns
)

select
    run_id,
    trace_id,
    rank,
    pid,
    tid,
    event_idx,
    ts_ns,
    device,
    device_type,
    device_id,
    addr,
    bytes,
    total_allocated_bytes,
    total_reserved_bytes,
    addr is not null
        and total_allocated_bytes is not null
        and total_reserved_bytes is not null as on_curve,
    sum(bytes) over (
        partition by trace_id, device order by ts_ns, event_idx rows unbounded preceding
    ) as net_allocated_bytes,
    node_pos,
    node_event_idx,
    node_name,
    coalesce(
        lower(node_cat) in ('cpu_op', 'operator')
        and not starts_with(node_name, 'ProfilerStep#')
        and not starts_with(node_name, 'Optimizer.')
        and not (starts_with(node_name, 'enumerate(DataLoader)#') and ends_with(node_name, '.__next__'))
        and not starts_with(node_name, 'enumerate(DataPipe)#')
        and node_name not in ('DataParallel.forward', 'DistributedDataParallel.forward'),
        false
    ) as attached_to_op
from attached
