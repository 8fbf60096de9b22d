-- One row per host range (int_host_ranges) in each of two op trees, with its nesting depth, parent (and the
-- parent's end) and subtree extent, built per thread by time containment ([ts, end) nests in its parent; ties:
-- earlier start, then longer, then trace order).
-- tree 'torch': cpu_op and user_annotation ranges per (pid, tid), as torch's key_averages nests FunctionEvents.
-- tree 'tb_plugin': Operator ranges, ProfilerStep#N, nccl:/gloo: annotations and nn.Module python functions per tid,
-- as torch-tb-profiler's op tree (event_parser.py, op_tree.py). O(n log n): one +1/-1 sweep gives the depth and
-- last_pos (the last range starting before this one ends), which bounds the subtree, whose members are the
-- contiguous positions pos .. last_pos; the last first child per depth gives the parent, the nearest range one
-- level up. Only integers and keys: the names and other wide columns join back once, in int_op_nodes, which is
-- what the models read.
-- source: torch.autograd.profiler_util EventList._populate_cpu_children; torch-tb-profiler 0.4.3 op_tree.py
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

-- Integers per (tree, trace, thread) and per name: the tree is built on narrow integer rows (sorts and joins
-- carry no strings). Numbers, positions and depths are cast to
-- 32 bits: row_number() gives 64 and sum() 128, which widen every sort, window and join after them (about a
-- fifth of the buffer and of the time).
threads as materialized (
    select tree, trace_id, thread_key, row_number() over (order by tree, trace_id, thread_key)::integer as thread_no
    from (select distinct tree, trace_id, thread_key from tree_nodes)
),

names as materialized (
    select name, row_number() over (order by name)::integer as name_no
    from (select distinct name from int_host_ranges)
),

nodes as (
    select
        threads.thread_no, tree_nodes.event_idx, tree_nodes.ts_ns, tree_nodes.dur_ns, tree_nodes.end_ns,
        tree_nodes.external_id,
        tree_nodes.dur_ns > 0 as has_length,
        names.name_no,
        tree_nodes.kind = 'op' as is_operator,
        tree_nodes.kind = 'op' and not starts_with(tree_nodes.name, 'ProfilerStep#') as is_plain_operator
    from tree_nodes
    join threads using (tree, trace_id, thread_key)
    join names using (name)
),

ordered as (
    select *, row_number() over (partition by thread_no order by ts_ns, end_ns desc, event_idx)::integer as pos
    from nodes
),

-- One sweep over starts and ends (ends before starts at the same instant; zero-length ranges never enclose
-- anything, so they add 0) gives at a start its depth, and at an end the number of ranges starting before it,
-- which is the subtree's last position since pos orders by start.
edges as (
    select thread_no, ts_ns as t, 1 as edge_order, pos, if(has_length, 1, 0) as delta
    from ordered
    union all
    select thread_no, end_ns as t, 0 as edge_order, pos, -1 as delta
    from ordered
    where has_length
),

sweep as (
    select
        thread_no, pos, edge_order,
        (sum(delta) over running)::integer - delta as depth,
        (sum(edge_order) over running)::integer as starts_before
    from edges
    window running as (partition by thread_no order by t, edge_order, pos rows unbounded preceding)
),

extents as (
    select
        thread_no, pos,
        max(depth) filter (where edge_order = 1) as depth,
        max(starts_before) filter (where edge_order = 0) as starts_before
    from sweep
    group by thread_no, pos
),

with_depth as (
    select ordered.*, extents.depth, greatest(extents.starts_before, ordered.pos) as last_pos
    from ordered
    join extents using (thread_no, pos)
),

-- The parent is the nearest range before this one (in pos) at depth - 1. Depth rises by at most one per position,
-- so a node right after a range one level up is its first child (that range is the parent), and any later node at
-- the same depth shares the parent of the last first child before it. Parents travel as values (lag, then
-- last_value per depth), and an only child is a first child whose next node at its depth is another first child
-- (or none): no self-join of the tree, no count of children.
first_children as (
    select
        *,
        if(
            lag(depth) over by_pos = depth - 1,
            {'event_idx': lag(event_idx) over by_pos, 'end_ns': lag(end_ns) over by_pos,
             'name_no': lag(name_no) over by_pos, 'is_operator': lag(is_operator) over by_pos},
            null
        ) as first_child_parent
    from with_depth
    window by_pos as (partition by thread_no order by pos)
),

parents as (
    select
        *,
        last_value(first_child_parent ignore nulls) over (by_depth rows unbounded preceding) as parent,
        first_child_parent is not null and coalesce(lead(first_child_parent is not null) over by_depth, true)
            as only_child
    from first_children
    window by_depth as (partition by thread_no, depth order by pos)
),

linked as (
    select
        * exclude (first_child_parent, parent),
        parent.event_idx as parent_event_idx,
        parent.end_ns as parent_end_ns,
        parent.name_no as parent_name_no,
        parent.is_operator as parent_is_operator
    from parents
)

-- merged_into_parent: the only child of a same-name parent, which both anchors fold into that parent
-- (torch EventList._remove_dup_nodes; tb_plugin remove_dup_nodes, there only between two Operator nodes).
select
    threads.tree,
    threads.trace_id,
    threads.thread_key,
    -- numbers (tree, trace, thread_key) within this build: an integer to partition and join by
    linked.thread_no,
    linked.event_idx,
    linked.ts_ns,
    linked.dur_ns,
    linked.end_ns,
    linked.external_id,
    linked.depth,
    linked.pos,
    linked.parent_event_idx,
    linked.parent_end_ns,
    linked.last_pos,
    linked.only_child
        and linked.parent_name_no = linked.name_no
        and (threads.tree = 'torch' or (linked.is_plain_operator and linked.parent_is_operator))
        as merged_into_parent
from linked
join threads using (thread_no)
