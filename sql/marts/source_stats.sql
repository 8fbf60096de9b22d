-- One row per line of user code that called into torch ("jump to source"): the ops whose innermost frame outside
-- torch and the standard library (int_op_source_frames: the `Call stack` arg, else the enclosing python_function
-- ranges of with_stack=True) is that line. calls and total_cpu_ns / total_device_ns count the line's outermost ops
-- only (an op whose parent op was called from the same line is part of that call, not a call of its own), so
-- nothing is counted twice; self_cpu_ns sums the self CPU time of every op of the line. Device time is that of the
-- kernels/memcpy/memset the ops and their descendants launched (int_op_nodes). Ops with no user frame (backward ops
-- on the autograd thread, what runs under AccumulateGrad, traces recorded without stacks) are left out. Self times
-- agree with torch's FunctionEvents to the nanosecond on CPU traces torch writes (tests/sql/test_attribution.py). source_line is the line the trace names:
-- the function's first line for torch 2.x python_function frames, the calling line in older Call stacks.
-- Deliberate differences from key_averages(group_by_stack_n=N): it groups by (op name, top N entries), counting
-- nested ops once per op name; here one row per frame sums the ops under it without double counting. Python
-- frames running inside an op (a GC finaliser, say) are children of the op in torch's tree when stacks are
-- recorded; the op tree here holds ops and annotations only, so their time stays in the op's self time.
-- grain: run_id, trace_id, source_file, source_line, function
-- source: torch.autograd.profiler_util EventList.key_averages(group_by_stack_n); tb_plugin "jump to source"
with

ops as (
    select
        nodes.*,
        frames.source_file,
        frames.source_line,
        frames.function,
        parent_frames.source_file is not distinct from frames.source_file
            and parent_frames.source_line is not distinct from frames.source_line
            and parent_frames.function is not distinct from frames.function
            as inside_same_line_call
    from int_op_nodes as nodes
    join int_op_source_frames as frames using (trace_id, event_idx)
    left join int_op_source_frames as parent_frames
        on parent_frames.trace_id = nodes.trace_id
        and parent_frames.event_idx = nodes.parent_event_idx
    where nodes.tree = 'torch'
)

select
    run_id,
    trace_id,
    source_file,
    source_line,
    function,
    count(*) filter (where not inside_same_line_call) as calls,
    coalesce(sum(dur_ns) filter (where not inside_same_line_call), 0)::bigint as total_cpu_ns,
    sum(self_cpu_ns)::bigint as self_cpu_ns,
    coalesce(sum(device_total_ns) filter (where not inside_same_line_call), 0)::bigint as total_device_ns,
    any_value(rank) as rank
from ops
group by all
