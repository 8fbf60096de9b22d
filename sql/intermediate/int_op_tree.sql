-- One row per host range (int_host_ranges) in each of two op trees, with its nesting depth, parent (and the
-- parent's end) and subtree extent, built per thread by time containment ([ts, end) nests in its parent; ties:
-- earlier start, then longer, then trace order).
-- tree 'torch': cpu_op and user_annotation ranges per (pid, tid), as torch's key_averages nests FunctionEvents.
-- tree 'tb_plugin': Operator ranges, ProfilerStep#N, nccl:/gloo: annotations and nn.Module python functions per tid,
-- as torch-tb-profiler's op tree (event_parser.py, op_tree.py). O(n log n): op_tree() (transforms/op_tree.py, which
-- defines depth, pos, last_pos and the parent) sorts each thread's ranges once and sweeps their starts and ends;
-- a subtree is the contiguous positions pos .. last_pos. Only integers and keys: the names and other wide columns
-- join back once, in int_op_nodes, which is what the models read.
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

-- Integers per (tree, trace, thread) and per name: the tree is built on integers (its lists carry no strings).
threads as materialized (
    select tree, trace_id, thread_key, row_number() over (order by tree, trace_id, thread_key)::integer as thread_no
    from (select distinct tree, trace_id, thread_key from tree_nodes)
),

names as materialized (
    select name, row_number() over (order by name)::integer as name_no
    from (select distinct name from int_host_ranges)
),

-- Each thread's ranges as one list, linked into its tree in pos order.
linked as (
    select
        threads.thread_no,
        op_tree(list({
            'event_idx': tree_nodes.event_idx, 'ts_ns': tree_nodes.ts_ns, 'dur_ns': tree_nodes.dur_ns,
            'end_ns': tree_nodes.end_ns, 'external_id': tree_nodes.external_id, 'name_no': names.name_no,
            'is_operator': tree_nodes.kind = 'op',
            'is_plain_operator': tree_nodes.kind = 'op' and not starts_with(tree_nodes.name, 'ProfilerStep#'),
            'torch_tree': tree_nodes.tree = 'torch'
        })) as ranges
    from tree_nodes
    join threads using (tree, trace_id, thread_key)
    join names using (name)
    group by threads.thread_no
)

-- merged_into_parent: the only child of a same-name parent, which both anchors fold into that parent
-- (torch EventList._remove_dup_nodes; tb_plugin remove_dup_nodes, there only between two Operator nodes).
select
    threads.tree,
    threads.trace_id,
    threads.thread_key,
    -- numbers (tree, trace, thread_key) within this build: an integer to partition and join by
    threads.thread_no,
    ranges.*
from (select thread_no, unnest(ranges) as ranges from linked)
join threads using (thread_no)
