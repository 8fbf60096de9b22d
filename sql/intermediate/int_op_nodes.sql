-- One row per node of both host op trees (int_op_tree), with its range's columns (int_host_ranges) and its own
-- figures, as torch's FunctionEvent has them: self CPU = duration − the parts of its direct children inside it;
-- self device = duration of the GPU activities (kernels, memcpy, memset) the node launched itself, and
-- self_kernel_count the kernels among them; total device and kernel_count add those of its whole subtree. A GPU
-- activity's launcher is the node whose External id is that of the runtime call with the activity's correlation
-- (else the activity's own External id). Nodes without an External id (nn.Module ranges of the tb_plugin tree)
-- launch nothing themselves.
-- Read by every model that needs the trees: op_stats, op_stats_by_shape, source_stats, annotation_stats,
-- module_stats, op_perf, memory_by_op, kernel_sequences, int_op_source_frames and int_memory_records.
-- source: torch.autograd.profiler_util FunctionEvent (self_cpu_time_total, device_time_total) (torch 2.x)
with

runtime_external_ids as (
    select trace_id, correlation, any_value(external_id) as external_id
    from runtime_calls
    where correlation is not null
    group by all
),

launched as (
    select
        activity.trace_id,
        coalesce(runtime.external_id, activity.external_id) as external_id,
        sum(activity.dur_ns) as device_ns,
        count(*) filter (where activity.source_table = 'kernels') as kernel_count
    from int_kernels_classified as activity
    left join runtime_external_ids as runtime using (trace_id, correlation)
    group by all
),

-- A child counts only for the part of it inside its parent: async ops (e.g. c10d collectives on MTIA)
-- can end after the op that started them, which would otherwise make the parent's self time negative.
children as (
    select
        thread_no, parent_event_idx as event_idx,
        sum(greatest(0, least(end_ns, parent_end_ns) - ts_ns)) as children_ns
    from int_op_tree
    where parent_event_idx is not null
    group by all
),

-- The figures travel on narrow rows (a window carries every column it is given through its sort); the range's
-- names and other wide columns join once, at the end.
node_self as (
    select
        nodes.thread_no,
        nodes.pos,
        nodes.last_pos,
        nodes.dur_ns - coalesce(children.children_ns, 0) as self_cpu_ns,
        coalesce(launched.device_ns, 0) as self_device_ns,
        coalesce(launched.kernel_count, 0) as self_kernel_count
    from int_op_tree as nodes
    left join children using (thread_no, event_idx)
    left join launched
        on launched.trace_id = nodes.trace_id
        and launched.external_id = nodes.external_id
),

-- A subtree is the contiguous run of positions pos .. last_pos: its totals are one window frame.
node_totals as (
    select
        thread_no,
        pos,
        self_cpu_ns,
        self_device_ns,
        self_kernel_count,
        sum(self_device_ns) over subtree as device_total_ns,
        sum(self_kernel_count) over subtree as kernel_count
    from node_self
    window subtree as (partition by thread_no order by pos rows between current row and last_pos - pos following)
)

select
    tree.tree,
    host_range.run_id,
    tree.trace_id,
    host_range.rank,
    host_range.pid,
    host_range.tid,
    tree.thread_key,
    tree.thread_no,
    tree.event_idx,
    host_range.name,
    host_range.cat,
    tree.* exclude (tree, trace_id, thread_key, thread_no, event_idx),
    node_totals.* exclude (thread_no, pos)
from int_op_tree as tree
join node_totals using (thread_no, pos)
join int_host_ranges as host_range
    on host_range.trace_id = tree.trace_id
    and host_range.event_idx = tree.event_idx
