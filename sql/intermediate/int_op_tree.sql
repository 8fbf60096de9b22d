-- One row per host range in each of two op trees, with its nesting depth, parent (and the parent's end) and subtree
-- extent, built per thread by time containment ([ts, end) nests in its parent; ties: earlier start, then longer,
-- then trace order).
-- tree 'torch': cpu_op and user_annotation ranges per (pid, tid), as torch's key_averages nests FunctionEvents.
-- tree 'tb_plugin': Operator ranges, ProfilerStep#N, nccl:/gloo: annotations and nn.Module python functions per tid,
-- as torch-tb-profiler's op tree (event_parser.py, op_tree.py). pos orders a thread's ranges by start; last_pos (the
-- last range starting before this one ends) bounds the subtree, whose members are the contiguous positions
-- pos .. last_pos; the parent is the nearest range before it one level up (transforms/op_tree.py).
-- source: torch.autograd.profiler_util EventList._populate_cpu_children; torch-tb-profiler 0.4.3 op_tree.py
with

-- Not materialized, though read by both trees: scanning the raw files again is cheaper than holding every column
-- of every range in memory.
host_ranges as not materialized (
    select 'op' as kind, run_id, trace_id, rank, pid, tid, event_idx, name, cat, ts_ns, dur_ns, end_ns, external_id
    from cpu_ops
    union all
    select
        'annotation' as kind, run_id, trace_id, rank, pid, tid, event_idx, name, cat, ts_ns, dur_ns, end_ns, external_id
    from annotations
    where not coalesce(on_device, false)
    union all
    select 'module' as kind, run_id, trace_id, rank, pid, tid, event_idx, name, cat, ts_ns, dur_ns, end_ns, null
    from python_functions
    where python_module_id is not null
),

tree_nodes as not materialized (
    select 'torch' as tree, pid || '/' || tid as thread_key, *
    from host_ranges
    where kind != 'module'
    union all
    select 'tb_plugin' as tree, tid as thread_key, *
    from host_ranges
    where kind in ('op', 'module')
        or name like 'ProfilerStep#%'
        or name in (
            'nccl:broadcast', 'nccl:reduce', 'nccl:all_reduce', 'nccl:all_gather', 'nccl:reduce_scatter',
            'gloo:broadcast', 'gloo:reduce', 'gloo:all_reduce', 'gloo:all_gather', 'gloo:reduce_scatter'
        )
),

-- thread_no numbers (tree, trace, thread_key) within this build.
threads as (
    select tree, trace_id, thread_key, row_number() over (order by tree, trace_id, thread_key)::integer as thread_no
    from (select distinct tree, trace_id, thread_key from tree_nodes)
),

-- Each thread's ranges as lists, one row per thread (run_id and rank are the trace's, tid the thread's).
thread_ranges as (
    select
        tree, run_id, trace_id, rank, tid, thread_key,
        list(pid) as pid,
        list(event_idx) as event_idx,
        list(kind) as kind,
        list(name) as name,
        list(cat) as cat,
        list(ts_ns) as ts_ns,
        list(dur_ns) as dur_ns,
        list(end_ns) as end_ns,
        list(external_id) as external_id
    from tree_nodes
    group by tree, run_id, trace_id, rank, tid, thread_key
),

-- The nesting, per thread in numpy (transforms/op_tree.py: a sort by start and binary searches, where a window
-- over every start and end costs several times as much): pos, depth, last_pos, the parent's index in the lists
-- (0: none) and only_child, list by list in the threads' order.
nested as (
    select threads.thread_no, thread_ranges.*, op_tree_nest(ts_ns, end_ns, event_idx) as nest
    from thread_ranges
    join threads using (tree, trace_id, thread_key)
),

ranges as (
    select
        tree, run_id, trace_id, rank, tid, thread_key, thread_no,
        unnest(pid) as pid,
        unnest(event_idx) as event_idx,
        unnest(kind) as kind,
        unnest(name) as name,
        unnest(cat) as cat,
        unnest(ts_ns) as ts_ns,
        unnest(dur_ns) as dur_ns,
        unnest(end_ns) as end_ns,
        unnest(external_id) as external_id,
        unnest(nest.depth) as depth,
        unnest(nest.pos) as pos,
        unnest(nest.last_pos) as last_pos,
        unnest(nest.only_child) as only_child,
        unnest(list_select(event_idx, nest.parent)) as parent_event_idx,
        unnest(list_select(end_ns, nest.parent)) as parent_end_ns,
        unnest(list_select(name, nest.parent)) as parent_name,
        unnest(list_select(kind, nest.parent)) as parent_kind
    from nested
)

-- merged_into_parent: the only child of a same-name parent, which both anchors fold into that parent
-- (torch EventList._remove_dup_nodes; tb_plugin remove_dup_nodes, there only between two Operator nodes).
select
    tree,
    run_id,
    trace_id,
    rank,
    pid,
    tid,
    thread_key,
    -- numbers (tree, trace, thread_key) within this build: an integer to partition and join by
    thread_no,
    event_idx,
    name,
    cat,
    ts_ns,
    dur_ns,
    end_ns,
    external_id,
    depth,
    pos,
    parent_event_idx,
    parent_end_ns,
    last_pos,
    only_child
        and parent_name = name
        and (tree = 'torch' or (kind = 'op' and not starts_with(name, 'ProfilerStep#') and parent_kind = 'op'))
        as merged_into_parent
from ranges
