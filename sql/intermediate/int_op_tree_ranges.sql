-- One row per range of the two op trees, as op_tree (transforms/op_tree.py) reads it: int_host_ranges by tree
-- (the trees and their definitions are int_op_nodes'), threads numbered, with what it launched itself.
-- int_op_nodes links them a batch of pieces at a time, so that no call holds a whole thread of a long trace.
-- A piece is a thread's ranges between two ProfilerStep# starts of its trace that no range of the thread crosses:
-- nothing is open there, so the trees on either side are apart and the positions after it follow on. It holds the
-- ranges starting in one step's stretch (from its start to the next step's), and in the next stretches while a
-- range of the thread runs on into them; the ranges before the first step, and those without a start time (which
-- sort last and open nothing), start pieces of their own.
-- grain: thread_no, event_idx
-- source: torch.autograd.profiler_util EventList._populate_cpu_children (torch 2.x); torch-tb-profiler 0.4.3 op_tree.py
-- column: thread_no: numbers (tree, trace, thread_key) within this build
-- column: name_key: the range's name as op_tree compares it (a hash)
-- column: is_operator: a cpu_op (an Operator to tb_plugin)
-- column: is_plain_operator: a cpu_op that is no ProfilerStep#
-- column: torch_tree: the range is of the torch tree
-- column: device_ns: the time of the GPU activities the range launched itself
-- column: kernel_count: the kernels among them
-- column: step: the ProfilerStep# whose stretch holds the range's start (null before the first)
-- column: piece: the range's piece, numbered in time order, trace by trace
-- column: pos_offset: the ranges of its thread in the pieces before
with

-- Each range in the stretch holding its start (int_step_buckets), by that stretch's start: -inf before the first
-- step, +inf without a start time (such a range sorts last).
bucketed as (
    select
        host_ranges.*,
        least((host_ranges.ts_ns - grids.first_ns) >> grids.shift, grids.last_bucket) as bucket
    from int_host_ranges as host_ranges
    left join (select distinct trace_id, first_ns, shift, last_bucket from int_step_buckets) as grids using (trace_id)
),

stretched as (
    select
        bucketed.*,
        case
            when len(buckets.starts_ns) = 0 then 0
            else len(list_filter(buckets.starts_ns, start_ns -> start_ns <= bucketed.ts_ns))
        end as starts_in_bucket,
        buckets.starts_ns,
        buckets.steps,
        buckets.before_ns,
        buckets.before_step
    from bucketed
    left join int_step_buckets as buckets using (trace_id, bucket)
),

located as (
    select
        stretched.* exclude (bucket, starts_in_bucket, starts_ns, steps, before_ns, before_step),
        case
            when ts_ns is null then 9223372036854775807
            when starts_in_bucket > 0 then starts_ns[starts_in_bucket]
            else coalesce(before_ns, -9223372036854775808)
        end as stretch_ns,
        if(starts_in_bucket > 0, steps[starts_in_bucket], before_step) as step
    from stretched
),

tree_nodes as not materialized (
    select 'torch' as tree, pid || '/' || tid as thread_key, *
    from located
    where in_torch_tree
    union all
    select 'tb_plugin' as tree, tid as thread_key, *
    from located
    where in_tb_plugin_tree
),

-- Integers per (tree, trace, thread) and per name: the trees are built on integers (their lists carry no strings).
threads as materialized (
    select tree, trace_id, thread_key, row_number() over (order by tree, trace_id, thread_key)::integer as thread_no
    from (select distinct tree, trace_id, thread_key from tree_nodes)
),

-- A GPU activity's launcher: the range of the tree that its runtime call (the call with the activity's correlation)
-- names by External id, as torch links them (FunctionEvent's device time), where the trace's External ids name ops;
-- else the innermost range holding the call on its thread (int_launch_ops: HTA's link, the one that holds on PyTorch
-- ~1.13 traces, whose runtime calls carry their correlation id as External id: int_degenerate_ids); an activity
-- without a runtime call is its own External id's (a trace without runtime events).
calls as (
    select
        runtime_calls.trace_id,
        runtime_calls.correlation,
        any_value(runtime_calls.external_id) filter (where degenerate.trace_id is null) as external_id
    from runtime_calls
    left join int_degenerate_ids as degenerate using (trace_id)
    where runtime_calls.correlation is not null
    group by all
),

named_launchers as (
    select holders.tree, calls.trace_id, calls.correlation, min(holders.event_idx) as event_idx
    from calls
    join int_launch_holders as holders using (trace_id, external_id)
    group by all
),

activity_launchers as (
    select
        trees.tree,
        activity.trace_id,
        activity.dur_ns,
        activity.source_table,
        coalesce(named.event_idx, held.event_idx, own_id.event_idx) as event_idx
    from int_kernels_classified as activity
    cross join (select distinct tree from threads) as trees
    left join calls
        on calls.trace_id = activity.trace_id
        and calls.correlation = activity.correlation
    left join named_launchers as named
        on named.tree = trees.tree
        and named.trace_id = activity.trace_id
        and named.correlation = activity.correlation
    left join int_launch_ops as held
        on held.tree = trees.tree
        and held.trace_id = activity.trace_id
        and held.correlation = activity.correlation
    left join int_launch_holders as own_id
        on calls.trace_id is null
        and own_id.tree = trees.tree
        and own_id.trace_id = activity.trace_id
        and own_id.external_id = activity.external_id
),

launched as (
    select
        tree,
        trace_id,
        event_idx,
        sum(dur_ns)::bigint as device_ns,
        count(*) filter (where source_table = 'kernels') as kernel_count
    from activity_launchers
    where event_idx is not null
    group by all
),

nodes as materialized (
    select
        tree_nodes.*,
        threads.thread_no,
        -- the trees compare names only for equality: a 64-bit hash (a false match needs a collision between two of a
        -- trace's names, about n^2 / 2^65 for n names), which costs no join on the strings
        hash(tree_nodes.name) as name_key,
        tree_nodes.kind = 'op' as is_operator,
        tree_nodes.kind = 'op' and not starts_with(tree_nodes.name, 'ProfilerStep#') as is_plain_operator,
        tree_nodes.tree = 'torch' as torch_tree,
        coalesce(launched.device_ns, 0) as device_ns,
        coalesce(launched.kernel_count, 0) as kernel_count
    from tree_nodes
    join threads using (tree, trace_id, thread_key)
    left join launched using (tree, trace_id, event_idx)
),

thread_stretches as (
    select
        thread_no, trace_id, stretch_ns, count(*) as ranges, max(ts_ns + dur_ns) filter (where dur_ns > 0) as max_end_ns
    from nodes
    group by thread_no, trace_id, stretch_ns
),

-- A stretch starts a piece of its thread unless a range of the thread that started before it ends after its start.
stretch_cuts as (
    select
        *,
        coalesce(max(max_end_ns) over earlier > stretch_ns, false) as runs_on,
        coalesce(sum(ranges) over earlier, 0) as ranges_before
    from thread_stretches
    window earlier as (partition by thread_no order by stretch_ns rows between unbounded preceding and 1 preceding)
),

stretch_pieces as (
    select
        thread_no, trace_id, stretch_ns, ranges_before,
        max(if(runs_on, null, stretch_ns)) over (partition by thread_no order by stretch_ns rows unbounded preceding)
            as piece_ns
    from stretch_cuts
),

-- Per stretch of a thread: its piece, numbered in time order, trace by trace, and the thread's ranges before it.
pieces as (
    select
        thread_no,
        stretch_ns,
        dense_rank() over (order by trace_id, piece_ns, thread_no) as piece,
        min(ranges_before) over (partition by thread_no, piece_ns) as pos_offset
    from stretch_pieces
)

select
    pieces.piece,
    pieces.pos_offset,
    nodes.tree,
    nodes.trace_id,
    nodes.thread_key,
    nodes.thread_no,
    nodes.event_idx,
    nodes.ts_ns,
    nodes.dur_ns,
    nodes.name_key,
    nodes.is_operator,
    nodes.is_plain_operator,
    nodes.torch_tree,
    nodes.device_ns,
    nodes.kernel_count,
    nodes.step
from nodes
join pieces using (thread_no, stretch_ns)
