-- One row per host op (cpu_ops) that ran under user code: the innermost Python frame of its stack outside torch
-- and the standard library, as `source_file`, `source_line`, `function` (frames are `file.py(line): function`;
-- `nn.Module: Name_N` and `<built-in ...>` entries are not frames). The stack is the op's `Call stack` arg where
-- the trace has one (innermost entry first: 2021 traces, and torch 2.x with the verbose experimental config);
-- otherwise the python_function ranges of `with_stack=True` on the op's thread that enclose the op's start.
-- Ops under a backward function take the frame of the forward op it differentiates (torch's
-- _set_backward_stacktraces; the link is the fwdbwd flow from the forward op to the backward function), so backward
-- time lands on the forward line; ops under AccumulateGrad (no forward op, no sequence number) get none, as in torch.
-- Library frames: paths starting `torch/` (torch strips the sys.path prefix from file names) or holding
-- `site-packages/torch/`; stdlib modules (int_python_stdlib_modules) by their first path component, or absolute
-- paths under `lib/pythonX.Y/` outside site-packages; `<frozen ...>`-like names. A user file named like a stdlib
-- module (`copy.py`) is taken for the stdlib: once torch strips the prefix, nothing else tells them apart.
-- source: torch.autograd.profiler_util FunctionEvent.stack / torch.profiler python_tracer (torch 2.x)
with

-- Candidate frames: every entry of every Call stack (with its position, innermost 1), and every python_function.
stack_entries as (
    select
        trace_id,
        event_idx,
        unnest(string_split(call_stack, ';')) as entry,
        generate_subscripts(string_split(call_stack, ';'), 1) as position
    from cpu_ops
    where call_stack is not null and call_stack != ''
),

entries as (
    select 'call_stack' as origin, trace_id, event_idx, position, entry, null as pid, null as tid,
        null::bigint as ts_ns, null::bigint as end_ns
    from stack_entries
    union all
    select 'python_function' as origin, trace_id, event_idx, null as position, name as entry, pid, tid, ts_ns, end_ns
    from python_functions
    where dur_ns > 0
),

parsed as (
    select
        *,
        regexp_extract(entry, '^(.+)\((\d+)\): (.*)$', ['file', 'line', 'function']) as frame
    from entries
),

user_frames as (
    select
        parsed.* exclude (frame),
        frame.file as source_file,
        cast(frame.line as bigint) as source_line,
        frame.function
    from parsed
    where frame.file != ''
        and not starts_with(frame.file, '<')
        and not regexp_matches(frame.file, '^torch/|site-packages/torch/')
        and not (regexp_matches(frame.file, '/lib/python3\.\d+/') and not contains(frame.file, '-packages/'))
        and regexp_replace(split_part(frame.file, '/', 1), '\.py$', '') not in (
            select module from int_python_stdlib_modules
        )
),

-- The innermost user frame of each op's call stack (a window, not arg_min: an aggregate's strings are held in memory
-- whatever its buffer, and there is one per op).
from_call_stack as (
    select
        trace_id, event_idx,
        {'source_file': source_file, 'source_line': source_line, 'function': function} as frame
    from user_frames
    where origin = 'call_stack'
    qualify row_number() over (partition by trace_id, event_idx order by position) = 1
),

-- The innermost user python_function range open at an op's start, per thread, by one sweep over range starts (+1),
-- range ends (-1) and op starts (0): user ranges nest, so the innermost one open at an op is the last range that
-- started at the op's nesting level (the number of ranges open there). At one instant ends go first, then starts
-- (longest first), then ops, so that a range starting with an op encloses it.
ranges as (
    select * from user_frames where origin = 'python_function'
),

probes as (
    select trace_id, pid, tid, event_idx, ts_ns
    from cpu_ops
    semi join (select distinct trace_id, pid, tid from ranges) using (trace_id, pid, tid)
    where call_stack is null or call_stack = ''
),

edges as (
    select trace_id, pid, tid, ts_ns as t, 1 as edge_order, -end_ns as tie, 1 as delta, event_idx as range_idx,
        null::bigint as op_idx
    from ranges
    union all
    select trace_id, pid, tid, end_ns as t, 0 as edge_order, 0 as tie, -1 as delta, null, null
    from ranges
    union all
    select trace_id, pid, tid, ts_ns as t, 2 as edge_order, 0 as tie, 0 as delta, null, event_idx
    from probes
),

levels as (
    select
        *,
        sum(delta) over (partition by trace_id, pid, tid order by t, edge_order, tie rows unbounded preceding) as level
    from edges
),

innermost as (
    select
        trace_id, op_idx as event_idx,
        last_value(range_idx ignore nulls) over (
            partition by trace_id, pid, tid, level order by t, edge_order, tie rows unbounded preceding
        ) as range_idx
    from levels
    where edge_order != 0
    qualify op_idx is not null and level > 0
),

from_python as (
    select
        innermost.trace_id, innermost.event_idx,
        {'source_file': ranges.source_file, 'source_line': ranges.source_line, 'function': ranges.function} as frame
    from innermost
    join ranges
        on ranges.trace_id = innermost.trace_id
        and ranges.event_idx = innermost.range_idx
),

own_frames as (
    select trace_id, event_idx, frame, 'call_stack' as origin from from_call_stack
    union all
    select trace_id, event_idx, frame, 'python_function' as origin from from_python
),

-- A fwdbwd flow runs from a forward op to the backward function (autograd node) that differentiates it; each end
-- binds to the op starting at the flow's time on its thread (the outermost one on a tie).
flow_ends as (
    select flows.trace_id, flows.flow_id, flows.ph, ops.event_idx
    from flows
    join cpu_ops as ops
        on ops.trace_id = flows.trace_id
        and ops.pid = flows.pid
        and ops.tid = flows.tid
        and ops.ts_ns = flows.ts_ns
    where flows.cat = 'fwdbwd'
    qualify row_number() over (partition by flows.trace_id, flows.event_idx order by ops.dur_ns desc) = 1
),

forward_ops as (
    select backward.trace_id, backward.event_idx, forward.event_idx as forward_idx
    from flow_ends as backward
    join flow_ends as forward
        on forward.trace_id = backward.trace_id
        and forward.flow_id = backward.flow_id
        and forward.ph = 's'
    where backward.ph = 'f'
),

-- Backward functions: the autograd nodes torch records in its BACKWARD_FUNCTION scope, which the JSON does not
-- carry (the engine's `autograd::engine::evaluate_function: <node>` range around each has the node's sequence number
-- and forward thread id too, but is no backward function): the ops at the end of a fwdbwd flow, and the node the
-- engine runs inside that range. torch's frame for what runs under one is that of the first op with the node's
-- sequence number on the forward thread: the forward op the flow links to, else, for nodes no forward op made
-- (CopySlices), the engine's range around the node, whose frame is the node's own (both are called from the
-- line that ran backward()). AccumulateGrad has no sequence number: torch gives what runs under it no frame.
backward_functions as (
    select
        tree.trace_id,
        tree.thread_no,
        tree.pos,
        tree.last_pos,
        coalesce(forward.forward_idx, if(op.sequence_number >= 0, tree.event_idx, null)) as frame_idx
    from int_op_nodes as tree
    join cpu_ops as op
        on op.trace_id = tree.trace_id
        and op.event_idx = tree.event_idx
    left join int_op_nodes as parent
        on parent.tree = 'torch'
        and parent.trace_id = tree.trace_id
        and parent.event_idx = tree.parent_event_idx
    left join forward_ops as forward
        on forward.trace_id = tree.trace_id
        and forward.event_idx = tree.event_idx
    -- only a trace with frames has any to pass on (most traces are recorded without stacks)
    semi join (select distinct trace_id from own_frames) as framed
        on framed.trace_id = tree.trace_id
    where tree.tree = 'torch'
        and (
            forward.forward_idx is not null
            or parent.name = 'autograd::engine::evaluate_function: ' || tree.name
        )
),

-- The innermost backward function whose subtree (positions pos .. last_pos) holds a node of the torch tree, the
-- node itself included (torch's bw_parent). They nest (CopySlices runs the node of the view it wrote through), so
-- one sweep over positions counts those open (+1 at pos, -1 after last_pos) and the innermost one open at a node
-- is the last that started at the node's level.
backward_edges as (
    select trace_id, thread_no, pos, 0 as edge_order, 1 as delta, {'frame_idx': frame_idx} as backward,
        null as event_idx
    from backward_functions
    union all
    select trace_id, thread_no, last_pos as pos, 2 as edge_order, -1 as delta, null, null
    from backward_functions
    union all
    select trace_id, thread_no, pos, 1 as edge_order, 0 as delta, null, event_idx
    from int_op_nodes
    where tree = 'torch' and thread_no in (select thread_no from backward_functions)
),

backward_levels as (
    select *, sum(delta) over (partition by thread_no order by pos, edge_order rows unbounded preceding) as level
    from backward_edges
),

innermost_backward as (
    select
        trace_id,
        event_idx,
        last_value(backward ignore nulls) over (
            partition by thread_no, level order by pos, edge_order rows unbounded preceding
        ) as backward
    from backward_levels
    where edge_order != 2
    qualify edge_order = 1 and level > 0
),

under_backward as (
    select trace_id, event_idx, backward.frame_idx
    from innermost_backward
),

-- As torch's EventList._set_backward_stacktraces: ops under a backward function take the frame of its forward op.
frames as (
    select
        ops.trace_id,
        ops.event_idx,
        if(backward.event_idx is null, own.frame, forward.frame) as frame,
        if(backward.event_idx is null, own.origin, forward.origin) as origin,
        backward.event_idx is not null as from_forward_op
    from cpu_ops as ops
    left join under_backward as backward using (trace_id, event_idx)
    left join own_frames as own using (trace_id, event_idx)
    left join own_frames as forward
        on forward.trace_id = backward.trace_id
        and forward.event_idx = backward.frame_idx
    -- The profiler's step range and the DataLoader and optimizer-step record_function ranges are user annotations in
    -- torch 2 traces; before torch 2 they were Operators. They are no op of the user's code (nor tb_plugin's).
    where not regexp_matches(ops.name, '^(ProfilerStep#|enumerate\(DataLoader\)#|Optimizer\.step#)')
)

select trace_id, event_idx, frame.source_file, frame.source_line, frame.function, origin, from_forward_op
from frames
where frame is not null
