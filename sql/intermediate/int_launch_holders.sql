-- One row per range that may launch GPU activities (int_launch_ops), per op tree ('torch', 'tb_plugin'; modules
-- launch nothing), on its tree's thread ((pid, tid) for torch's tree, tid for tb_plugin's), with keys that put each
-- thread's times in a span of their own (thread number * 2^64 + ns) for int_launch_ops' containment join.
-- grain: tree, trace_id, event_idx
-- column: thread_base: the thread's number * 2^64
-- column: start_key: thread_base + ts_ns
-- column: end_key: thread_base + end_ns
with

holders as (
    select 'torch' as tree, pid || '/' || tid as thread_key, trace_id, event_idx, external_id, ts_ns, end_ns, dur_ns
    from int_host_ranges
    where in_torch_tree and kind != 'module'
    union all
    select 'tb_plugin' as tree, tid::varchar as thread_key, trace_id, event_idx, external_id, ts_ns, end_ns, dur_ns
    from int_host_ranges
    where in_tb_plugin_tree and kind != 'module'
),

threads as (
    select
        tree, trace_id, thread_key,
        row_number() over (order by tree, trace_id, thread_key)::hugeint << 64 as thread_base
    from (select distinct tree, trace_id, thread_key from holders)
)

select
    holders.*,
    threads.thread_base,
    threads.thread_base + holders.ts_ns as start_key,
    threads.thread_base + holders.end_ns as end_key
from holders
join threads using (tree, trace_id, thread_key)
