-- One row per runtime call with a correlation id and op tree (int_op_nodes' 'torch' and 'tb_plugin') that a range
-- of the tree holds in time, with the innermost such range on the call's own thread ((pid, tid) for torch's tree,
-- tid for tb_plugin's; int_launch_holders): ties go to the inner range as the tree links them (later start, then
-- earlier end, then later event). It is the link HTA's call graph makes (a runtime call is a child of the op open
-- around it), and the one int_op_tree_ranges uses where a call's External id names no range of the tree, as on
-- PyTorch ~1.13 traces, whose runtime calls carry their correlation id as External id (int_degenerate_ids).
-- The containment join is an inequality join on keys that put each thread's times in a span of their own; the
-- query is this join alone, which DuckDB plans as an IEJoin (with more around it, as a piecewise merge join: 30x).
-- grain: tree, trace_id, correlation
-- column: event_idx: the innermost holding range (int_host_ranges' event_idx)
-- source: holistictraceanalysis 0.5.0 hta/common/trace_call_graph.py (CallGraph: runtime events' parents by time per
-- thread, kernels by index_correlation)
with

calls as (
    select
        runtime_calls.trace_id, runtime_calls.correlation, runtime_calls.pid, runtime_calls.tid,
        runtime_calls.ts_ns, coalesce(runtime_calls.end_ns, runtime_calls.ts_ns) as end_ns
    from runtime_calls
    where runtime_calls.correlation is not null and runtime_calls.ts_ns is not null
    qualify row_number() over (
        partition by runtime_calls.trace_id, runtime_calls.correlation
        order by runtime_calls.ts_ns, runtime_calls.event_idx
    ) = 1
),

tree_calls as (
    select
        trees.tree, if(trees.tree = 'torch', calls.pid || '/' || calls.tid, calls.tid::varchar) as thread_key,
        calls.trace_id, calls.correlation, calls.ts_ns, calls.end_ns
    from calls
    cross join (values ('torch'), ('tb_plugin')) as trees(tree)
),

keyed_calls as (
    select tree_calls.tree, tree_calls.trace_id, tree_calls.correlation,
        threads.thread_base + tree_calls.ts_ns as start_key, threads.thread_base + tree_calls.end_ns as end_key
    from tree_calls
    join (select distinct tree, trace_id, thread_key, thread_base from int_launch_holders) as threads
        using (tree, trace_id, thread_key)
)

select
    keyed_calls.tree,
    keyed_calls.trace_id,
    keyed_calls.correlation,
    arg_max(holders.event_idx, (holders.ts_ns, -holders.end_ns, holders.event_idx)) as event_idx
from keyed_calls
join int_launch_holders as holders
    on holders.start_key <= keyed_calls.start_key
    and keyed_calls.end_key <= holders.end_key
where holders.dur_ns > 0
group by all
