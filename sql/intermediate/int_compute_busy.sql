-- One row per merged busy interval of a trace's computation, on the device and on the host. Device: its
-- COMPUTATION kernels (int_kernels_classified, HTA's kernel types), over all streams. Host: its cpu_ops that
-- neither are, enclose nor sit inside communication on their thread (int_op_nodes' torch tree): communication
-- being c10d:: calls, record_param_comms, _c10d_functional:: ops and nccl:/gloo: ranges. So a call that waits
-- for a collective (a synchronous all_reduce, an autograd hook that issues one) counts only its computing
-- children, and the copies a gloo worker makes inside its range count as communication. gloo:send/gloo:recv
-- ranges are left out of that: they run on the calling thread from the call until its wait ends, and what the
-- thread does meanwhile (the schedule defers the waits of sends) is its own. Over all host threads.
-- Intervals merge when they overlap or touch. Read by comm_by_group and pipeline_stages: communication not
-- inside these intervals is exposed. The intervals of a trace's side are disjoint, so the time computing before
-- any instant t is busy_before_ns + (min(t, end_ns) - start_ns) of the last interval starting at or before t: a
-- span's time under computation is that at its end less that at its start (an ASOF join each, not a join of
-- every span with every interval).
-- grain: run_id, trace_id, on_device, start_ns
-- column: busy_before_ns: the trace's time computing (on this side) before start_ns
-- source: holistictraceanalysis 0.5.0 hta/utils/utils.py::merge_kernel_intervals (merging, device side)
with

op_nodes as (
    select
        run_id, trace_id, rank, thread_no, pos, last_pos, name, ts_ns, end_ns,
        lower(cat) in ('cpu_op', 'operator') as is_op,
        starts_with(name, 'c10d::') or starts_with(name, '_c10d_functional::') or name = 'record_param_comms'
            or starts_with(name, 'nccl:') or (starts_with(name, 'gloo:') and name not in ('gloo:send', 'gloo:recv'))
            as is_comm
    from int_op_nodes
    where tree = 'torch'
),

-- A subtree is the positions pos .. last_pos of its thread, so one pass in pos order tells both: a node is (or
-- sits inside) communication when a communication node at or before it reaches its position, and encloses
-- communication when the next communication node after it lies within its subtree.
comm_reach as (
    select
        *,
        max(if(is_comm, last_pos, null)) over (
            partition by trace_id, thread_no order by pos rows between unbounded preceding and current row
        ) as comm_last_pos,
        -- a running min in reverse order: DuckDB takes a pass per row over a frame that runs to the partition's end
        min(if(is_comm, pos, null)) over (
            partition by trace_id, thread_no order by pos desc rows between unbounded preceding and 1 preceding
        ) as next_comm_pos
    from op_nodes
),

host_compute as (
    select run_id, trace_id, rank, ts_ns, end_ns
    from comm_reach
    where is_op
        and coalesce(comm_last_pos < pos, true)  -- is or sits inside communication
        and coalesce(next_comm_pos > last_pos, true)  -- encloses communication
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
),

merged as (
    select run_id, trace_id, any_value(rank) as rank, on_device, min(ts_ns) as start_ns, max(end_ns) as end_ns
    from islands
    group by run_id, trace_id, on_device, island
)

select
    *,
    coalesce(sum(end_ns - start_ns) over (
        partition by trace_id, on_device order by start_ns rows between unbounded preceding and 1 preceding
    ), 0)::bigint as busy_before_ns
from merged
