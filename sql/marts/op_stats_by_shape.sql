-- One row per host op name and input shapes of a trace, as torch's prof.key_averages(group_by_input_shape=True):
-- op_stats split by the op's `Input Dims` (int_op_shapes: minified JSON with torch's input_shapes conventions;
-- `[]` for ops recorded without shapes). Figures per node come from int_op_nodes; an op merged into a same-name
-- parent (an overload wrapper, torch's EventList._remove_dup_nodes) counts its self time under its parent's
-- shapes, as torch's removal moves it there. So a scalar overload forwarding to its tensor overload (add.Scalar
-- of `[[1],[],[]]` calling add.Tensor, div.Scalar calling div.Tensor) is one call; TraceLens' per-op-type sheets,
-- which split rows by `Input type`, count the wrapper and its callee as two.
-- grain: run_id, trace_id, op_name, input_dims
-- source: torch.autograd.profiler_util EventList.key_averages(group_by_input_shapes=True) (torch 2.x)
with

nodes as (
    select
        nodes.*,
        nodes.merged_into_parent as is_dup,
        coalesce(if(nodes.merged_into_parent, parent_shape.input_dims, own_shape.input_dims), '[]')
            as input_dims
    from int_op_nodes as nodes
    left join int_op_shapes as own_shape
        on own_shape.trace_id = nodes.trace_id
        and own_shape.event_idx = nodes.event_idx
    left join int_op_shapes as parent_shape
        on parent_shape.trace_id = nodes.trace_id
        and parent_shape.event_idx = nodes.parent_event_idx
    where nodes.tree = 'torch'
)

select
    run_id,
    trace_id,
    regexp_replace(name, '^ProfilerStep#\d+$', 'ProfilerStep*') as op_name,
    input_dims,
    count(*) filter (where not is_dup) as calls,
    coalesce(sum(dur_ns) filter (where not is_dup), 0)::bigint as total_cpu_ns,
    sum(self_cpu_ns)::bigint as self_cpu_ns,
    coalesce(sum(device_total_ns) filter (where not is_dup), 0)::bigint as total_device_ns,
    sum(self_device_ns)::bigint as self_device_ns,
    any_value(rank) as rank
from nodes
group by all
