-- One row per host range in each of two op trees, with its nesting depth, parent and subtree extent, built per
-- thread by time containment ([ts, end) nests in its parent; ties: earlier start, then longer, then trace order).
-- tree 'torch': cpu_op and user_annotation ranges per (pid, tid), as torch's key_averages nests FunctionEvents.
-- tree 'tb_plugin': Operator ranges, ProfilerStep#N, nccl:/gloo: annotations and nn.Module python functions per tid,
-- as torch-tb-profiler's op tree (event_parser.py, op_tree.py). O(n log n): a +1/-1 sweep gives the depth, an ASOF
-- join finds the nearest open range one level up, and last_pos (the last range starting before this one ends) bounds
-- the subtree, whose members are the contiguous positions pos .. last_pos.
-- source: torch.autograd.profiler_util EventList._populate_cpu_children; torch-tb-profiler 0.4.3 op_tree.py
with

host_ranges as (
    select run_id, trace_id, rank, pid, tid, event_idx, name, cat, ts_ns, dur_ns, end_ns, external_id
    from cpu_ops
    union all
    select run_id, trace_id, rank, pid, tid, event_idx, name, cat, ts_ns, dur_ns, end_ns, external_id
    from annotations
    where not coalesce(on_device, false)
),

tree_nodes as (
    select 'torch' as tree, pid || '/' || tid as thread_key, *
    from host_ranges
    union all
    select 'tb_plugin' as tree, tid as thread_key, *
    from host_ranges
    where lower(cat) in ('cpu_op', 'operator')
        or name like 'ProfilerStep#%'
        or name in (
            'nccl:broadcast', 'nccl:reduce', 'nccl:all_reduce', 'nccl:all_gather', 'nccl:reduce_scatter',
            'gloo:broadcast', 'gloo:reduce', 'gloo:all_reduce', 'gloo:all_gather', 'gloo:reduce_scatter'
        )
    union all
    select
        'tb_plugin' as tree, tid as thread_key,
        run_id, trace_id, rank, pid, tid, event_idx, name, cat, ts_ns, dur_ns, end_ns, null as external_id
    from python_functions
    where python_module_id is not null
),

ordered as (
    select
        *,
        row_number() over (
            partition by tree, trace_id, thread_key order by ts_ns, end_ns desc, event_idx
        ) as pos
    from tree_nodes
),

-- Ends sort before starts at the same instant; zero-length ranges never enclose anything, so they add 0.
edges as (
    select tree, trace_id, thread_key, ts_ns as t, 1 as edge_order, pos, if(dur_ns > 0, 1, 0) as delta
    from ordered
    union all
    select tree, trace_id, thread_key, end_ns as t, 0 as edge_order, pos, -1 as delta
    from ordered
    where dur_ns > 0
),

sweep as (
    select
        tree, trace_id, thread_key, pos, delta,
        sum(delta) over (
            partition by tree, trace_id, thread_key order by t, edge_order, pos rows unbounded preceding
        ) - delta as depth
    from edges
    qualify edge_order = 1
),

with_depth as (
    select ordered.*, sweep.depth
    from ordered
    join sweep using (tree, trace_id, thread_key, pos)
),

parents as (
    select tree, trace_id, thread_key, depth, pos, event_idx
    from with_depth
    where dur_ns > 0
),

-- For each start instant, the last position starting at it: ranges starting before an end form a prefix of pos.
starts as (
    select tree, trace_id, thread_key, ts_ns, max(pos) as last_pos
    from ordered
    group by all
),

linked as (
    select
        node.*,
        parent.event_idx as parent_event_idx,
        if(node.dur_ns > 0, greatest(starts.last_pos, node.pos), node.pos) as last_pos
    from with_depth as node
    asof left join parents as parent
        on parent.tree = node.tree
        and parent.trace_id = node.trace_id
        and parent.thread_key = node.thread_key
        and parent.depth = node.depth - 1
        and parent.pos < node.pos
    asof left join starts
        on starts.tree = node.tree
        and starts.trace_id = node.trace_id
        and starts.thread_key = node.thread_key
        and starts.ts_ns < node.end_ns
),

child_counts as (
    select tree, trace_id, thread_key, parent_event_idx as event_idx, count(*) as child_count
    from linked
    where parent_event_idx is not null
    group by all
)

-- merged_into_parent: the only child of a same-name parent, which both anchors fold into that parent
-- (torch EventList._remove_dup_nodes; tb_plugin remove_dup_nodes, there only between two Operator nodes).
select
    node.tree,
    node.run_id,
    node.trace_id,
    node.rank,
    node.pid,
    node.tid,
    node.thread_key,
    node.event_idx,
    node.name,
    node.cat,
    node.ts_ns,
    node.dur_ns,
    node.end_ns,
    node.external_id,
    node.depth,
    node.pos,
    node.parent_event_idx,
    node.last_pos,
    coalesce(
        siblings.child_count = 1
        and parent.name = node.name
        and (
            node.tree = 'torch'
            or (
                lower(node.cat) in ('cpu_op', 'operator') and lower(parent.cat) in ('cpu_op', 'operator')
                and not starts_with(node.name, 'ProfilerStep#')
            )
        ),
        false
    ) as merged_into_parent
from linked as node
left join linked as parent
    on parent.tree = node.tree
    and parent.trace_id = node.trace_id
    and parent.thread_key = node.thread_key
    and parent.event_idx = node.parent_event_idx
left join child_counts as siblings
    on siblings.tree = node.tree
    and siblings.trace_id = node.trace_id
    and siblings.thread_key = node.thread_key
    and siblings.event_idx = node.parent_event_idx
