-- One row per host range (int_host_ranges) in each of two op trees, with its place in the tree and its own and
-- subtree figures, as torch's FunctionEvent has them.
-- The trees nest by time containment per thread ([ts, end) nests in its parent; ties: earlier start, then longer,
-- then trace order):
-- tree 'torch': cpu_op and user_annotation ranges per (pid, tid), as torch's key_averages nests FunctionEvents.
-- tree 'tb_plugin': Operator ranges, ProfilerStep#N, nccl:/gloo: annotations and nn.Module python functions per tid,
-- as torch-tb-profiler's op tree (event_parser.py, op_tree.py).
-- op_tree() (transforms/op_tree.py, which defines depth, pos, last_pos, the parent and the merge into it) links
-- each thread's ranges in O(n log n); a subtree is the contiguous positions pos .. last_pos.
-- Figures: self CPU = duration − the parts of its direct children inside it; self device = duration of the GPU
-- activities (kernels, memcpy, memset) the node launched itself; total device and kernel_count add those (and
-- the kernels among them) of its whole subtree. A GPU activity's launcher is the node whose
-- External id is that of the runtime call with the activity's correlation (else the activity's own External id).
-- Nodes without an External id (nn.Module ranges of the tb_plugin tree) launch nothing themselves.
-- Read by every model that needs the trees: op_stats, op_stats_by_shape, source_stats, annotation_stats,
-- module_stats, op_perf, memory_by_op, kernel_sequences, int_op_source_frames and int_memory_records.
-- source: torch.autograd.profiler_util EventList._populate_cpu_children, FunctionEvent (self_cpu_time_total,
-- device_time_total) (torch 2.x); torch-tb-profiler 0.4.3 op_tree.py
with

tree_nodes as not materialized (
    select 'torch' as tree, pid || '/' || tid as thread_key, *
    from int_host_ranges
    where kind != 'module'
    union all
    select 'tb_plugin' as tree, tid as thread_key, *
    from int_host_ranges
    where kind in ('op', 'module')
        or name like 'ProfilerStep#%'
        or name in (
            'nccl:broadcast', 'nccl:reduce', 'nccl:all_reduce', 'nccl:all_gather', 'nccl:reduce_scatter',
            'gloo:broadcast', 'gloo:reduce', 'gloo:all_reduce', 'gloo:all_gather', 'gloo:reduce_scatter'
        )
),

-- Integers per (tree, trace, thread) and per name: the trees are built on integers (their lists carry no strings).
threads as materialized (
    select tree, trace_id, thread_key, row_number() over (order by tree, trace_id, thread_key)::integer as thread_no
    from (select distinct tree, trace_id, thread_key from tree_nodes)
),

names as materialized (
    select name, row_number() over (order by name)::integer as name_no
    from (select distinct name from int_host_ranges)
),

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
        sum(activity.dur_ns)::bigint as device_ns,
        count(*) filter (where activity.source_table = 'kernels') as kernel_count
    from int_kernels_classified as activity
    left join runtime_external_ids as runtime using (trace_id, correlation)
    group by all
),

-- Each thread's ranges as one list, with what each launched itself, linked into its tree in pos order.
linked as (
    select
        threads.tree,
        threads.trace_id,
        threads.thread_key,
        threads.thread_no,
        op_tree(list({
            'event_idx': tree_nodes.event_idx, 'ts_ns': tree_nodes.ts_ns, 'dur_ns': tree_nodes.dur_ns,
            'name_no': names.name_no,
            'is_operator': tree_nodes.kind = 'op',
            'is_plain_operator': tree_nodes.kind = 'op' and not starts_with(tree_nodes.name, 'ProfilerStep#'),
            'torch_tree': tree_nodes.tree = 'torch',
            'device_ns': coalesce(launched.device_ns, 0),
            'kernel_count': coalesce(launched.kernel_count, 0)
        })) as nodes
    from tree_nodes
    join threads using (tree, trace_id, thread_key)
    join names using (name)
    left join launched
        on launched.trace_id = tree_nodes.trace_id
        and launched.external_id = tree_nodes.external_id
    group by all
)

select
    node.tree,
    host_range.run_id,
    node.trace_id,
    host_range.rank,
    host_range.pid,
    host_range.tid,
    node.thread_key,
    -- numbers (tree, trace, thread_key) within this build: an integer to partition and join by
    node.thread_no,
    node.event_idx,
    host_range.name,
    host_range.cat,
    host_range.ts_ns,
    host_range.dur_ns,
    host_range.end_ns,
    host_range.external_id,
    node.depth,
    node.pos,
    node.parent_event_idx,
    node.last_pos,
    node.merged_into_parent,
    host_range.dur_ns - node.children_ns as self_cpu_ns,
    node.self_device_ns,
    node.device_total_ns,
    node.kernel_count
from (select * exclude (nodes), unnest(nodes, recursive := true) from linked) as node
join int_host_ranges as host_range
    on host_range.trace_id = node.trace_id
    and host_range.event_idx = node.event_idx
