-- One row per merged busy interval of a trace's computation, on the device and on the host. Device: its
-- COMPUTATION kernels (int_kernels_classified, HTA's kernel types), over all streams. Host: its cpu_ops that
-- neither are, enclose nor sit inside communication on their thread (int_op_nodes' torch tree): communication
-- being c10d:: calls, record_param_comms, _c10d_functional:: ops and nccl:/gloo: ranges. So a call that waits
-- for a collective (a synchronous all_reduce, an autograd hook that issues one) counts only its computing
-- children, and the copies a gloo worker makes inside its range count as communication. gloo:send/gloo:recv
-- ranges are left out of that: they run on the calling thread from the call until its wait ends, and what the
-- thread does meanwhile (the schedule defers the waits of sends) is its own. Over all host threads.
-- Intervals merge when they overlap or touch. Read by comm_by_group and pipeline_stages: communication not
-- inside these intervals is exposed.
-- grain: run_id, trace_id, on_device, start_ns
-- source: holistictraceanalysis 0.5.0 hta/utils/utils.py::merge_kernel_intervals (merging, device side)
with

op_nodes as (
    select
        run_id, trace_id, rank, thread_no, pos, last_pos, name, ts_ns, end_ns,
        lower(cat) in ('cpu_op', 'operator') as is_op
    from int_op_nodes
    where tree = 'torch'
),

comm_nodes as (
    select trace_id, thread_no, pos, last_pos
    from op_nodes
    where starts_with(name, 'c10d::') or starts_with(name, '_c10d_functional::') or name = 'record_param_comms'
        or starts_with(name, 'nccl:') or (starts_with(name, 'gloo:') and name not in ('gloo:send', 'gloo:recv'))
),

host_compute as (
    select run_id, trace_id, rank, ts_ns, end_ns
    from op_nodes
    -- is or sits inside communication
    anti join comm_nodes as outer_comm
        on outer_comm.trace_id = op_nodes.trace_id
        and outer_comm.thread_no = op_nodes.thread_no
        and outer_comm.pos <= op_nodes.pos
        and op_nodes.pos <= outer_comm.last_pos
    -- encloses communication
    anti join comm_nodes as inner_comm
        on inner_comm.trace_id = op_nodes.trace_id
        and inner_comm.thread_no = op_nodes.thread_no
        and op_nodes.pos < inner_comm.pos
        and inner_comm.pos <= op_nodes.last_pos
    where is_op
),

busy as (
    select run_id, trace_id, rank, false as on_device, ts_ns, end_ns
    from host_compute
    union all
    select run_id, trace_id, rank, true as on_device, ts_ns, end_ns
    from int_kernels_classified
    where kernel_type = 'COMPUTATION'
),

flagged as (
    select
        *,
        coalesce(
            ts_ns > max(end_ns) over (
                partition by trace_id, on_device order by ts_ns, end_ns
                rows between unbounded preceding and 1 preceding
            ),
            true
        ) as opens
    from busy
),

islands as (
    select *, sum(opens::int) over (partition by trace_id, on_device order by ts_ns, end_ns) as island
    from flagged
)

select run_id, trace_id, any_value(rank) as rank, on_device, min(ts_ns) as start_ns, max(end_ns) as end_ns
from islands
group by run_id, trace_id, on_device, island
