-- One row per distinct launch pattern of the shallowest aten ops: an op name and the ordered GPU events (kernels,
-- memcpy, memset, stream syncs) its call subtree launched, with how often the pattern occurs and its GPU time.
-- Definition, as HTA 0.5.0's get_frequent_cuda_kernel_sequences(operator_name, min_pattern_len): the candidates
-- are CPU ops whose name contains operator_name; the roots are the candidates at the smallest call-stack depth of
-- any candidate in the trace that launched at least min_pattern_len GPU events (via the runtime calls inside the
-- op, joined by correlation); a root's pattern is its name then its GPU events' names in start order.
-- Parameters fixed here: operator_name = 'aten::', min_pattern_len = 2 (HTA's default 3 finds nothing on
-- typical traces: the shallowest aten ops launch 1-2 events; a one-event "sequence" is just kernel_stats).
-- Events are those HTA analyses (int_hta_gpu_events, int_hta_runtime: its window drops the last ProfilerStep).
-- total_ns is the patterns' GPU event time (HTA's "GPU kernel duration", there in rounded µs), op_total_ns their
-- root ops' CPU time (HTA's "CPU op duration"). sequence_hash is md5 of the op name and event names.
-- Deliberate differences: depth is per thread (int_op_nodes's torch tree: cpu_op and user_annotation ranges),
-- whereas HTA hangs the backward thread's stack under the main thread's step, so backward-thread aten ops at the
-- shallowest depth are roots here and not in HTA; ties in start order break by trace order, not HTA's unstable sort.
-- grain: run_id, trace_id, sequence_hash
-- source: holistictraceanalysis 0.5.0 hta/analyzers/cuda_kernel_analysis.py::get_frequent_cuda_kernel_sequences
with

candidates as (
    select run_id, trace_id, rank, pid, tid, event_idx, name, ts_ns, end_ns, dur_ns, depth
    from int_op_nodes
    where tree = 'torch'
        and cat in ('cpu_op', 'Operator')
        and contains(name, 'aten::')
),

shallowest as (
    select *
    from candidates
    qualify depth = min(depth) over (partition by run_id, trace_id)
),

-- Roots at one depth never overlap on a thread, so the root holding a runtime call is the last one starting at or
-- before it (an ASOF join, not a range join), provided the call also ends inside it.
root_calls as (
    select
        root.run_id, root.trace_id, root.rank, root.event_idx as root_idx, root.name as op_name,
        root.dur_ns as op_dur_ns, call.event_idx as call_idx, call.correlation
    from runtime_calls as call
    asof join shallowest as root
        on call.run_id = root.run_id
        and call.trace_id = root.trace_id
        and call.pid = root.pid
        and call.tid = root.tid
        and call.ts_ns >= root.ts_ns
    where call.end_ns <= root.end_ns
),

root_events as (
    select
        root_calls.run_id, root_calls.trace_id, root_calls.rank, root_calls.root_idx, root_calls.op_name,
        root_calls.op_dur_ns,
        gpu.name as kernel_name, gpu.ts_ns, gpu.dur_ns, gpu.event_idx, gpu.source_table
    from root_calls
    join int_hta_runtime as kept
        on kept.run_id = root_calls.run_id
        and kept.trace_id = root_calls.trace_id
        and kept.event_idx = root_calls.call_idx
    join int_hta_gpu_events as gpu
        on gpu.run_id = root_calls.run_id
        and gpu.trace_id = root_calls.trace_id
        and gpu.correlation = root_calls.correlation
),

-- Each event's place in its root's launch order.
ordered as materialized (
    select
        *,
        row_number() over (partition by run_id, trace_id, root_idx order by ts_ns, source_table, event_idx) as nth
    from root_events
),

-- A root's pattern as numbers: its events and a 64-bit digest of their names in order (a list per root would be held
-- in memory whatever the buffer: an aggregate's lists are not spilled). Roots of one op with one count and digest
-- have one pattern (two patterns share them only by a collision of 64-bit hashes).
roots as (
    select
        run_id, trace_id, rank, root_idx, op_name,
        any_value(op_dur_ns) as op_dur_ns,
        sum(dur_ns) as gpu_ns,
        count(*) as kernel_count,
        bit_xor(hash(nth || chr(31) || kernel_name)) as digest
    from ordered
    group by run_id, trace_id, rank, root_idx, op_name
    having count(*) >= 2
),

patterns as (
    select
        run_id, trace_id, rank, op_name, kernel_count, digest,
        count(*) as occurrences,
        sum(gpu_ns)::bigint as total_ns,
        sum(op_dur_ns)::bigint as op_total_ns,
        min(root_idx) as example_idx
    from roots
    group by run_id, trace_id, rank, op_name, kernel_count, digest
),

-- Each pattern's names, from one root that has it.
named as (
    select
        patterns.run_id, patterns.trace_id, patterns.rank, patterns.op_name, patterns.occurrences,
        patterns.total_ns, patterns.op_total_ns,
        list(ordered.kernel_name order by ordered.nth) as kernels
    from patterns
    join ordered
        on ordered.run_id = patterns.run_id
        and ordered.trace_id = patterns.trace_id
        and ordered.root_idx = patterns.example_idx
    group by all
)

select
    run_id,
    trace_id,
    md5(op_name || chr(31) || array_to_string(kernels, chr(31))) as sequence_hash,
    rank,
    op_name,
    kernels,
    len(kernels) as kernel_count,
    occurrences,
    total_ns,
    op_total_ns,
    kernels[1] as first_kernel,
    kernels[-1] as last_kernel
from named
